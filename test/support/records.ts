/**
 * Complete controller records with plain defaults, for tests and benchmarks
 * that need many of them; callers override only what they are about.
 */
import type { RunRecord, SessionRecord } from '../../src/store/records.js';

export const RECORD_AT = '2030-01-01T00:00:00.000Z';

export function runRecord(over: Partial<RunRecord> & Pick<RunRecord, 'sessionId' | 'seq'>): RunRecord {
  const { sessionId, seq } = over;
  return {
    id: `${sessionId}-r${seq}`,
    kind: seq === 1 ? 'create' : 'send',
    requestKey: `key-${sessionId}-${seq}`,
    fingerprint: 'f'.repeat(64),
    interrupt: false,
    settings: { model: 'm', autonomy: 'off', reasoningEffort: null },
    state: 'succeeded',
    acceptedAt: RECORD_AT,
    startedAt: RECORD_AT,
    endedAt: RECORD_AT,
    cancelReason: null,
    reason: 'completed',
    error: null,
    usage: null,
    preview: '',
    needsAttention: false,
    permissionsDeclined: [],
    questions: [],
    predecessorFailure: null,
    events: [],
    hasResult: true,
    ...over,
  };
}

export function sessionRecord(over: Partial<SessionRecord> & Pick<SessionRecord, 'id'>): SessionRecord {
  return {
    createdAt: RECORD_AT,
    updatedAt: RECORD_AT,
    workspace: '/srv/work',
    title: null,
    labels: [],
    archived: false,
    replyTo: null,
    droidSessionId: null,
    headRunId: `${over.id}-r1`,
    factoryTitle: null,
    ...over,
  };
}
