/**
 * The durable records of the controller, as the layers above the store take
 * them: their types (each inferred from its schema in record-schemas.ts, the
 * one description of a record), the run states, and a run as accepted.
 * Plain JSON: what is written is what is read back. Prompts are never part
 * of any record.
 */
import type { RunRecord, RunState } from './record-schemas.js';

// The droid-side shapes a record carries, so that the layers above the wire
// client take them from here rather than from src/droid/.
export type { Autonomy } from '../droid/permission-policy.js';
export type { ErrorInfo, PermissionRecord, QuestionRecord, TokenUsage, TranscriptEntry } from '../droid/schemas.js';
export type { CheckoutRecord, CommitsAhead } from './checkout-types.js';
export type { ChangeSet, ContextStats } from './evidence-types.js';
export type {
  Budget,
  EffectiveSettings,
  ProgressRecord,
  RewindRecord,
  RunRecord,
  RunReply,
  RunResultFile,
  RunState,
  SessionRecord,
  TouchedFiles,
} from './record-schemas.js';

export const STATE_VERSION = 1;

export const LIVE_STATES: readonly RunState[] = ['starting', 'running', 'cancelling'];
export const TERMINAL_STATES: readonly RunState[] = ['succeeded', 'interrupted', 'failed', 'timed_out', 'cancelled', 'unknown'];

/** What identifies a run when it is accepted; everything else starts empty. */
export type AcceptedFields = Pick<RunRecord, 'id' | 'sessionId' | 'seq' | 'kind' | 'requestKey' | 'fingerprint' | 'interrupt' | 'settings' | 'acceptedAt'>;

/** A run as it is accepted: queued, nothing submitted, no outcome yet. */
export function acceptedRun(fields: AcceptedFields): RunRecord {
  return {
    ...fields,
    state: 'queued',
    startedAt: null,
    endedAt: null,
    cancelReason: null,
    reason: null,
    error: null,
    usage: null,
    preview: '',
    needsAttention: false,
    permissionsDeclined: [],
    questions: [],
    predecessorFailure: null,
    events: [],
    hasResult: false,
  };
}
