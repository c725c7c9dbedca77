/**
 * The evidence a worker adds to a submitted turn's result: structured output
 * checked against the caller's schema, the files the turn changed, and the
 * context occupancy droid reports. Kept apart from run-turn.ts, which only
 * calls `beginEvidence` before submitting and `finishEvidence` after the end.
 */
import type { DroidClient } from '../droid/client.js';
import type { TurnCollector } from '../droid/turn-collector.js';
import { changesSince, snapshotTree, type Launcher } from './git.js';
import { niced } from '../util/nice.js';
import { judgeStructuredOutput, type JsonObject } from './output-schema.js';
import type { ContextStats } from '../shared/evidence-types.js';
import type { TurnResult, TurnSpec } from '../worker/contract/protocol.js';
import { namesPathOutside, type TreeState } from './change-set.js';

/** Most time one snapshot (before or after) may take; a slower repository reads as unknown. */
const SNAPSHOT_BUDGET_MS = 5_000;
/** Most time droid gets to answer get_context_stats. */
const CONTEXT_STATS_MS = 2_000;

export interface EvidenceStart {
  /** The tree before the turn; null when it is not a git work tree or git failed. */
  before: Promise<TreeState | null>;
  launcher: Launcher | null;
}

/**
 * CPU niceness of the "before" snapshot's git (and its bwrap): it runs while
 * droid starts, which takes more than a core of a 2-core host for ~0.6 s
 * (docs/PROTOCOL-NOTES.md part 5), and is needed only at the submit.
 */
const BEFORE_NICENESS = 10;

/** Starts the "before" snapshot; droid writes nothing until a prompt is submitted, so this may run during setup. */
export function beginEvidence(spec: TurnSpec, launcher: Launcher | null): EvidenceStart {
  const budget = Math.min(SNAPSHOT_BUDGET_MS, spec.graceMs);
  const yielding = launcher ? niced(launcher, BEFORE_NICENESS) : (niced(undefined, BEFORE_NICENESS) ?? null);
  const before = snapshotTree({ workspace: spec.workspace, launcher: yielding, deadline: Date.now() + budget }).catch(() => null);
  return { before, launcher };
}

type Evidence = Pick<TurnResult, 'changes' | 'context'>;

/** After the turn ended: the changes since `before` and droid's context stats, in parallel, each bounded. */
export async function finishEvidence(
  spec: TurnSpec,
  start: EvidenceStart,
  client: DroidClient | undefined,
  collector: TurnCollector | undefined,
  notAfter: number,
): Promise<Evidence> {
  // Never past `notAfter` (see timeline.ts): evidence must not turn a result into a backstop kill.
  const budget = Math.min(SNAPSHOT_BUDGET_MS, spec.graceMs, notAfter - Date.now());
  if (budget <= 0) return { changes: null, context: null };
  const inputs = (collector?.transcript ?? []).flatMap((e) => (e.kind === 'tool' ? [e.input] : []));
  const changes = start.before.then(async (before) => {
    if (!before) return null;
    return changesSince(
      before,
      { workspace: spec.workspace, launcher: start.launcher, deadline: Date.now() + budget },
      namesPathOutside(inputs, spec.workspace),
    ).catch(() => null);
  });
  const context = client && !client.process.connection.closed ? readContext(client, Math.min(CONTEXT_STATS_MS, budget)) : Promise.resolve(null);
  return { changes: await changes, context: await context };
}

/** droid.get_context_stats of the open session, or null when droid did not answer with two sane counts. */
export async function readContext(client: DroidClient, timeoutMs: number): Promise<ContextStats | null> {
  try {
    const stats = await client.contextStats(timeoutMs);
    return contextOf(stats.used, stats.limit);
  } catch {
    return null;
  }
}

/** `{used, limit, fraction}` from droid's answer, or null when it is not two sane counts. */
export function contextOf(used: unknown, limit: unknown): ContextStats | null {
  if (typeof used !== 'number' || typeof limit !== 'number' || !Number.isFinite(used) || !Number.isFinite(limit) || used < 0 || limit <= 0) return null;
  return { used, limit, fraction: Math.round((used / limit) * 10_000) / 10_000 };
}

/**
 * A finished turn that asked for structured output: a success stands only with
 * an object that passes our own check. droid's `structured_output_missing`
 * becomes a named error of the same code.
 */
export function judgeOutput(
  schema: JsonObject,
  result: Pick<TurnResult, 'outcome' | 'reason' | 'error'>,
  collector: TurnCollector | undefined,
): Pick<TurnResult, 'outcome' | 'error' | 'structuredOutput'> {
  if (result.reason === 'structured_output_missing') {
    const detail = collector?.droidErrors.at(-1)?.text;
    return {
      outcome: 'failed',
      structuredOutput: null,
      error: {
        code: 'structured_output_missing',
        message: `the model never provided a structured output that droid accepted${detail ? ` (${detail})` : ''}`,
        retryable: true,
      },
    };
  }
  if (result.outcome !== 'succeeded') return { outcome: result.outcome, error: result.error, structuredOutput: null };
  const verdict = judgeStructuredOutput(schema, collector?.structuredOutput);
  if (verdict.status === 'valid') return { outcome: 'succeeded', error: null, structuredOutput: verdict.value };
  const code =
    verdict.status === 'missing' ? 'structured_output_missing' : verdict.status === 'too_large' ? 'structured_output_too_large' : 'structured_output_invalid';
  return {
    outcome: 'failed',
    structuredOutput: null,
    error: { code, message: `droid ended the turn completed, but ${verdict.problems.join('; ')}`, retryable: true },
  };
}
