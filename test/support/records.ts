/**
 * Complete controller records with plain defaults, for tests and benchmarks
 * that need many of them; callers override only what they are about.
 */
import { acceptedRun, type RunRecord, type SessionRecord } from '../../src/shared/records.js';

const RECORD_AT = '2030-01-01T00:00:00.000Z';

export function runRecord(over: Partial<RunRecord> & Pick<RunRecord, 'sessionId' | 'seq'>): RunRecord {
  const { sessionId, seq } = over;
  const accepted = acceptedRun({
    id: `${sessionId}-r${seq}`,
    sessionId,
    seq,
    kind: seq === 1 ? 'create' : 'send',
    requestKey: `key-${sessionId}-${seq}`,
    fingerprint: 'f'.repeat(64),
    interrupt: false,
    settings: { model: 'm', autonomy: 'off', reasoningEffort: null },
    acceptedAt: RECORD_AT,
  });
  // By default a turn that finished normally, with its result kept.
  return { ...accepted, state: 'succeeded', startedAt: RECORD_AT, endedAt: RECORD_AT, reason: 'completed', hasResult: true, ...over };
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
