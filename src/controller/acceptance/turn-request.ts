/**
 * What a caller asks for: a new session (`CreateInput`) or a follow-up
 * (`SendInput`), and the checks of it that need no state. Pure: a bad
 * request is refused here, before anything is read or recorded.
 */
import { canonicalJson, checkOutputSchema } from '../../evidence/output-schema.js';
import type { SandboxSpec } from '../../sandbox/sandbox.js';
import { ControllerError } from '../../shared/public-error.js';
import type { BudgetInput } from '../budget/budget-acceptance.js';
import type { Isolation } from '../checkouts/checkouts.js';
import type { Intent } from './fingerprint.js';
import type { Requested } from './turn-settings.js';

export interface CreateInput extends Requested {
  requestKey: string;
  workspace: string;
  prompt: string;
  replyTo: string | null;
  title?: string;
  labels?: string[];
  outputSchema?: Record<string, unknown>;
  /** The session's total budget over all its turns. */
  budget?: BudgetInput;
  /** "worktree": the session gets its own checkout (checkouts.ts); omitted or "none": it works in the workspace. */
  isolation?: Isolation;
  /** Less network than the host's policy ("model-only"), or its own ("host", the default); "open" only where the host's is. */
  network?: SessionNetwork;
  /** A fork of this session (issue 40), right after `run` (omitted: its latest turn). */
  forkFrom?: { session: string; run?: string };
}

export interface SendInput extends Requested {
  requestKey: string;
  session: string;
  prompt: string;
  interrupt?: boolean;
  outputSchema?: Record<string, unknown>;
  /** Omitted: keep the route; a conversation: retarget; null: detach. */
  replyTo?: string | null;
  /** This turn's own budget. */
  budget?: BudgetInput;
  /** Rewind the session to its state before this run first (issue 40). */
  rewindTo?: string;
  /** Compact the conversation first (issue 40). */
  compact?: boolean;
}

/** A send does one of droid's session powers before its prompt, at most: refused before anything is read. Pure. */
export function sessionPowerIntent(input: Pick<SendInput, 'rewindTo' | 'compact'>): Pick<Intent, 'rewindTo' | 'compact'> {
  if (input.rewindTo !== undefined && input.compact === true) {
    throw new ControllerError(
      'invalid_arguments',
      'rewindTo and compact cannot be combined in one turn',
      'Rewind in this turn and compact in the next one (or the other way round).',
    );
  }
  return { ...(input.rewindTo !== undefined && { rewindTo: input.rewindTo }), ...(input.compact === true && { compact: true as const }) };
}

/**
 * The caller's outputSchema, checked before anything else (size, depth, keys,
 * object root, compiles in ajv): a bad one is `invalid_arguments` with the
 * reason, and nothing is accepted or changed.
 */
export function validOutputSchema(schema: unknown): Record<string, unknown> | null {
  if (schema === undefined) return null;
  const check = checkOutputSchema(schema);
  if (!check.ok) {
    throw new ControllerError(
      'invalid_arguments',
      check.reason,
      'Pass outputSchema as a JSON Schema object with "type": "object" at its root, at most 32 KiB serialized, or omit it.',
    );
  }
  return check.schema;
}

export type SessionNetwork = 'model-only' | 'host' | 'open';

/**
 * What a session's network choice records: model-only, or nothing (the
 * host's policy). Never more than the host allows, like autonomy's ceiling,
 * nor, for a fork, than its source had.
 */
export function sessionNetwork(
  askedOfSession: SessionNetwork | undefined,
  sandbox: SandboxSpec,
  fork: { network?: 'model-only' } | null = null,
): 'model-only' | null {
  const asked = fork ? forkNetwork(askedOfSession, fork.network) : askedOfSession;
  const inherited = fork?.network === 'model-only';
  const hostMode = sandbox.mode === 'off' ? 'unconfined' : sandbox.network?.mode === 'proxy' ? 'proxy' : 'open';
  if (asked === 'open' && hostMode === 'proxy') {
    throw new ControllerError(
      'network_above_ceiling',
      'network "open" is more than this host allows: its turns reach only the model endpoints and the operator\'s allow list, through a proxy',
      'Omit network (or pass "host"), and ask the operator to add the hosts the work needs to "network": {"allow": [...]}.',
    );
  }
  if (asked === 'model-only' && hostMode === 'unconfined') {
    throw new ControllerError(
      'network_unavailable',
      `network "model-only" needs the turn sandbox, and this host runs turns without one ("sandbox": "off")${inherited ? ": a fork keeps its source's" : ''}`,
      inherited
        ? 'Start a new session instead of a fork, or ask the operator to run turns in bubblewrap.'
        : 'Omit network, or ask the operator to run turns in bubblewrap.',
    );
  }
  return asked === 'model-only' ? 'model-only' : null;
}

/**
 * The network a fork asks for. The source's conversation goes with the fork,
 * so a fork of a session that reaches only the model endpoints stays so: by
 * default, and never wider when asked.
 */
function forkNetwork(asked: SessionNetwork | undefined, source: 'model-only' | undefined): SessionNetwork | undefined {
  if (source !== 'model-only') return asked;
  if (asked !== undefined && asked !== 'model-only') {
    throw new ControllerError(
      'network_above_ceiling',
      `the source session reaches only the model endpoints (network "model-only"), and its conversation goes with the fork: network "${asked}" would widen that`,
      'Omit network (the fork keeps "model-only"), or start a new session instead of a fork.',
    );
  }
  return 'model-only';
}

export function isolationIntent(isolation: Isolation | undefined): Pick<Intent, 'isolation'> {
  return isolation === 'worktree' ? { isolation } : {};
}

export function schemaIntent(schema: Record<string, unknown> | null): Pick<Intent, 'outputSchema'> {
  return schema ? { outputSchema: canonicalJson(schema) } : {};
}
