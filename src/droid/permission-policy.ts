/**
 * What we answer when droid asks for permission or asks the user a question.
 * Pure: the same request at the same autonomy always gets the same answer.
 */
import { summarize } from '../util/text.js';
import { AMP_SERVER, isServerToolId, PUCK_LLM_ID } from './amp-tools.js';
import type { PermissionRecord, QuestionRecord } from './schemas.js';

/** Autonomy levels, least to most powerful; the index is the ordering. */
export const AUTONOMY_LEVELS = ['off', 'low', 'medium', 'high'] as const;
export type Autonomy = (typeof AUTONOMY_LEVELS)[number];

const PROCEED_ONCE = 'proceed_once';
const CANCEL = 'cancel';
const SUMMARY_CHARS = 300;

export type { PermissionRecord, QuestionRecord };

export interface PermissionDecision {
  selectedOption: string;
  approved: boolean;
  tools: PermissionRecord[];
}

interface PermissionParams {
  toolUses?: Array<{ toolUse?: { id?: unknown; name?: unknown; input?: unknown }; details?: unknown }>;
  options?: Array<{ value?: unknown }>;
}

function paramsOf(params: unknown): PermissionParams {
  return (typeof params === 'object' && params !== null ? params : {}) as PermissionParams;
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
  const p = paramsOf(params);
  const offered = Array.isArray(p.options) ? p.options.map((o) => o?.value) : [];
  const approve = autonomy === 'high' && offered.includes(PROCEED_ONCE);
  return { selectedOption: approve ? PROCEED_ONCE : CANCEL, approved: approve, tools: describeToolUses(p) };
}

// ── routed turns (reply-back) ─────────────────────────────────────────────

/**
 * The level droid runs a turn at. droid 0.225.2 runs MCP tools unasked at
 * `high` (and an interrupt cannot stop a call once begun), so a routed turn
 * the caller runs at `high` runs at `medium`, where every MCP call asks and
 * the reply gate sees it. Every other turn runs at the caller's level.
 */
export function droidAutonomy(caller: Autonomy, routed: boolean): Autonomy {
  return routed && caller === 'high' ? 'medium' : caller;
}

export type ToolUseKind =
  /** `amp-puck___puck`: judged by the reply gate. */
  | 'puck'
  /** Any other tool of the attached Amp server: never. */
  | 'amp_other'
  /** Everything else (Execute, Create, other MCP servers, …). */
  | 'other';

export interface ClassifiedUse {
  kind: ToolUseKind;
  /** droid's tool-use id, which its later tool_result carries; null if droid gave none. */
  toolUseId: string | null;
  input: unknown;
}

/** The tool uses of a permission request, classified by what may decide them. */
export function classifyToolUses(params: unknown): ClassifiedUse[] {
  const uses = paramsOf(params).toolUses;
  if (!Array.isArray(uses)) return [];
  return uses.map((use) => {
    const name = typeof use?.toolUse?.name === 'string' ? use.toolUse.name : '';
    const details = (typeof use?.details === 'object' && use.details !== null ? use.details : {}) as { serverName?: unknown; actualToolName?: unknown };
    const toolUseId = typeof use?.toolUse?.id === 'string' && use.toolUse.id !== '' ? use.toolUse.id : null;
    const ofServer = isServerToolId(name) || details.serverName === AMP_SERVER;
    // The puck tool only when every name droid gave agrees (a tool named `puck ` is another tool).
    const puck =
      name === PUCK_LLM_ID &&
      (details.serverName === undefined || details.serverName === AMP_SERVER) &&
      (details.actualToolName === undefined || details.actualToolName === 'puck');
    return { kind: puck ? 'puck' : ofServer ? 'amp_other' : 'other', toolUseId, input: use?.toolUse?.input };
  });
}

/**
 * The decision table of a routed turn. One request may carry several tool
 * uses; it runs (`proceed_once`, never a persistent `proceed_always*`) only
 * when droid offers a single-use approval and every use may run:
 *
 * | use           | caller off / low / medium | caller high (droid at medium) |
 * | ------------- | ------------------------- | ----------------------------- |
 * | puck          | the reply gate decides    | the reply gate decides        |
 * | other Amp     | cancel                    | cancel                        |
 * | anything else | cancel (today's policy)   | proceed_once (as `high` would)|
 *
 * droid at `medium` asks only for high-risk Execute and MCP calls (and its
 * own deny-list, which asks at `high` too), so approving those reproduces
 * `high` exactly while every puck call passes the gate. `gate` says whether
 * the reply gate approved a puck use; a use without a tool-use id cannot be
 * tracked to its result and is never approved.
 */
export function decideRoutedPermission(caller: Autonomy, params: unknown, gate: (use: ClassifiedUse) => boolean): PermissionDecision {
  const p = paramsOf(params);
  const offered = Array.isArray(p.options) ? p.options.map((o) => o?.value) : [];
  const uses = classifyToolUses(params);
  const mayRun = (use: ClassifiedUse): boolean => {
    if (use.kind === 'puck') return use.toolUseId !== null && gate(use);
    if (use.kind === 'amp_other') return false;
    return caller === 'high';
  };
  const approve = offered.includes(PROCEED_ONCE) && uses.length > 0 && uses.every(mayRun);
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
