/**
 * What we answer when droid asks for permission or asks the user a question.
 * Pure: the same request at the same autonomy always gets the same answer.
 */
import { summarize } from '../util/text.js';

export type Autonomy = 'off' | 'low' | 'medium' | 'high';

export const PROCEED_ONCE = 'proceed_once';
export const CANCEL = 'cancel';
const SUMMARY_CHARS = 300;

export interface PermissionRecord {
  tool: string;
  summary: string;
}

export interface QuestionRecord {
  topic: string;
  question: string;
  options: string[];
}

export interface PermissionDecision {
  selectedOption: string;
  approved: boolean;
  tools: PermissionRecord[];
}

interface PermissionParams {
  toolUses?: Array<{ toolUse?: { name?: unknown; input?: unknown }; details?: unknown }>;
  options?: Array<{ value?: unknown }>;
}

function describeToolUses(params: PermissionParams): PermissionRecord[] {
  const uses = Array.isArray(params.toolUses) ? params.toolUses : [];
  return uses.map((use) => {
    const name = typeof use?.toolUse?.name === 'string' ? use.toolUse.name : 'unknown';
    const input = use?.toolUse?.input as Record<string, unknown> | undefined;
    // The command line says most about an Execute; otherwise the whole input.
    const subject = input && typeof input.command === 'string' ? input.command : input;
    return { tool: name, summary: summarize(subject ?? {}, SUMMARY_CHARS) };
  });
}

/**
 * At `high`, a single-use approval when droid offers one; never a persistent
 * rule. Everywhere else, and at `high` without a single-use option: cancel.
 */
export function decidePermission(autonomy: Autonomy, params: unknown): PermissionDecision {
  const p = (typeof params === 'object' && params !== null ? params : {}) as PermissionParams;
  const offered = Array.isArray(p.options) ? p.options.map((o) => o?.value) : [];
  const approve = autonomy === 'high' && offered.includes(PROCEED_ONCE);
  return { selectedOption: approve ? PROCEED_ONCE : CANCEL, approved: approve, tools: describeToolUses(p) };
}

/** AskUser is always declined; the questions are kept so a human can answer. */
export function recordQuestions(params: unknown): QuestionRecord[] {
  const p = (typeof params === 'object' && params !== null ? params : {}) as { questions?: unknown };
  const questions = Array.isArray(p.questions) ? p.questions : [];
  return questions.map((q: { topic?: unknown; question?: unknown; options?: unknown }) => ({
    topic: summarize(typeof q?.topic === 'string' ? q.topic : '', 200),
    question: summarize(typeof q?.question === 'string' ? q.question : '', 2000),
    options: Array.isArray(q?.options) ? q.options.slice(0, 20).map((o: unknown) => summarize(String(o), 200)) : [],
  }));
}

export const ASK_USER_DECLINED = { cancelled: true } as const;
