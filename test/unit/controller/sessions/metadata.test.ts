/**
 * droid_update_session rules: what may change, every rejection, and that
 * nothing but title, labels, archive flag and updatedAt is ever touched.
 */
import { describe, expect, it } from 'vitest';
import { applySessionUpdate, MAX_LABELS, normalizeLabels, type SessionUpdate } from '../../../../src/controller/sessions/metadata.js';
import type { RunRecord, RunState, SessionRecord } from '../../../../src/shared/records.js';
import { runRecord } from '../../../support/records.js';
import { expectRejection } from '../../../support/assertions.js';

const CREATED = '2030-01-01T00:00:00.000Z';
const NOW = '2030-01-02T00:00:00.000Z';

const base: SessionRecord = Object.freeze({
  id: 's1',
  createdAt: CREATED,
  updatedAt: CREATED,
  workspace: '/srv/app',
  title: 'Old title',
  labels: Object.freeze(['bug', 'web']) as unknown as string[],
  archived: false,
  replyTo: null,
  droidSessionId: 'droid-uuid',
  headRunId: 'r2',
  factoryTitle: 'Old title',
});

function run(state: RunState, id = `r-${state}`): RunRecord {
  return Object.freeze(
    runRecord({ id, sessionId: 's1', seq: 1, requestKey: 'k', state, acceptedAt: CREATED, startedAt: null, endedAt: null, reason: null, hasResult: false }),
  );
}

const settled = [run('succeeded'), run('failed'), run('cancelled'), run('unknown')];

const update = (u: SessionUpdate, runs: RunRecord[] = settled) => applySessionUpdate(base, runs, u, NOW);
const labels = (n: number, prefix = 'l') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);

describe('applySessionUpdate', () => {
  it('sets and clears the title, and stamps updatedAt', () => {
    expect(update({ title: 'New' })).toEqual({ ...base, title: 'New', updatedAt: NOW });
    expect(update({ title: null })).toEqual({ ...base, title: null, updatedAt: NOW });
  });

  it('rejects empty, blank and overlong titles', () => {
    for (const title of ['', '   ', 'x'.repeat(201)]) expectRejection(() => update({ title }), 'invalid_arguments');
    expect(update({ title: 'x'.repeat(200) }).title).toHaveLength(200);
  });

  it('adds and removes labels, keeping them unique and sorted', () => {
    expect(update({ labels: { add: ['api', 'web', 'api'], remove: ['bug', 'absent'] } }).labels).toEqual(['api', 'web']);
    expect(update({ labels: { add: ['team:ops', 'v1.2', 'a_b-c'] } }).labels).toEqual(['a_b-c', 'bug', 'team:ops', 'v1.2', 'web']);
    expect(update({ labels: { remove: ['bug', 'web'] } }).labels).toEqual([]);
  });

  it('rejects labels that break the label rule, naming the label', () => {
    for (const label of ['Bug', 'has space', '-lead', '.lead', '', 'x'.repeat(51), 'ünï']) {
      const e = expectRejection(() => update({ labels: { add: [label] } }), 'invalid_arguments');
      expect(e.message).toContain('lowercase');
      expectRejection(() => update({ labels: { remove: [label] } }), 'invalid_arguments');
    }
    expect(update({ labels: { add: ['x'.repeat(50)] } }).labels).toContain('x'.repeat(50));
  });

  it('rejects a label both added and removed', () => {
    const e = expectRejection(() => update({ labels: { add: ['ops', 'api'], remove: ['api'] } }), 'invalid_arguments');
    expect(e.message).toContain('"api"');
  });

  it('allows at most 20 labels after the change', () => {
    expect(update({ labels: { add: labels(18) } }).labels).toHaveLength(20);
    expectRejection(() => update({ labels: { add: labels(19) } }), 'too_many_labels');
    // Removing in the same update makes room.
    expect(update({ labels: { add: labels(20), remove: ['bug', 'web'] } }).labels).toHaveLength(MAX_LABELS);
    // A session already at the limit can swap one label for another.
    const full = { ...base, labels: labels(20) };
    expect(applySessionUpdate(full, settled, { labels: { add: ['new'], remove: ['l00'] } }, NOW).labels).toHaveLength(20);
    expectRejection(() => applySessionUpdate(full, settled, { labels: { add: ['new'] } }, NOW), 'too_many_labels');
    // Re-adding existing labels is not growth.
    expect(applySessionUpdate(full, settled, { labels: { add: ['l00', 'l19'] } }, NOW).labels).toEqual(labels(20));
  });

  it('rejects an update that changes nothing', () => {
    for (const u of [{}, { labels: {} }, { labels: { add: [], remove: [] } }, { title: undefined }] as SessionUpdate[]) {
      expectRejection(() => update(u), 'invalid_arguments');
    }
  });

  it('rejects malformed values', () => {
    expectRejection(() => update({ archived: 'yes' as unknown as boolean }), 'invalid_arguments');
    expectRejection(() => update({ title: 5 as unknown as string }), 'invalid_arguments');
    expectRejection(() => update({ labels: { add: 'bug' as unknown as string[] } }), 'invalid_arguments');
    expectRejection(() => update({ labels: { add: [7 as unknown as string] } }), 'invalid_arguments');
  });

  it('archives a settled session and restores it', () => {
    expect(update({ archived: true })).toEqual({ ...base, archived: true, updatedAt: NOW });
    expect(applySessionUpdate({ ...base, archived: true }, settled, { archived: false }, NOW).archived).toBe(false);
    expect(update({ archived: true }, [])).toMatchObject({ archived: true });
  });

  it.each<RunState>(['queued', 'starting', 'running', 'cancelling'])('will not archive a session with a %s run', (state) => {
    const e = expectRejection(() => update({ archived: true, title: 'also' }, [...settled, run(state)]), 'session_busy');
    expect(e.retryable).toBe(true);
    expect(e.action).toMatch(/wait|cancel/i);
    // Other changes to a busy session are fine, and so is restoring it.
    expect(update({ title: 'busy is fine' }, [run(state)]).title).toBe('busy is fine');
    expect(update({ archived: false, labels: { add: ['x'] } }, [run(state)]).labels).toContain('x');
  });

  it('never touches anything but title, labels, archived and updatedAt, nor its inputs', () => {
    const runs = [run('running')];
    const next = update({ title: 'T', labels: { add: ['z'], remove: ['bug'] }, archived: false }, runs);
    const { title, labels: l, archived, updatedAt, ...rest } = next;
    const { title: _t, labels: _l, archived: _a, updatedAt: _u, ...before } = base;
    expect(rest).toEqual(before);
    expect({ title, labels: l, archived, updatedAt }).toEqual({ title: 'T', labels: ['web', 'z'], archived: false, updatedAt: NOW });
    expect(next.factoryTitle).toBe('Old title'); // the Factory sync notices the difference later
    expect(next.labels).not.toBe(base.labels);
    expect(base.labels).toEqual(['bug', 'web']);
    expect(runs[0]!.state).toBe('running');
  });
});

describe('normalizeLabels', () => {
  it('dedupes and sorts valid labels', () => {
    expect(normalizeLabels(['web', 'bug', 'web'])).toEqual(['bug', 'web']);
    expect(normalizeLabels([])).toEqual([]);
    expect(normalizeLabels([...labels(20), ...labels(20)])).toHaveLength(20);
  });

  it('rejects invalid labels rather than rewriting them, and more than 20', () => {
    expectRejection(() => normalizeLabels(['Bug']), 'invalid_arguments');
    expectRejection(() => normalizeLabels([' bug']), 'invalid_arguments');
    expectRejection(() => normalizeLabels(labels(21)), 'too_many_labels');
  });
});
