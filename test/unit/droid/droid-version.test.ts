import { describe, expect, it } from 'vitest';
import { DroidError } from '../../../src/droid/errors.js';
import { DroidVersionProbe, type VersionChange } from '../../../src/droid/version.js';

function probe(answers: Array<string | Error>, ttlMs = 1_000) {
  let clock = 0;
  let reads = 0;
  const changes: VersionChange[] = [];
  const pending: Array<() => void> = [];
  const gate = { hold: false };
  const p = new DroidVersionProbe(
    async () => {
      const answer = answers[Math.min(reads++, answers.length - 1)]!;
      if (gate.hold) await new Promise<void>((resolve) => pending.push(resolve));
      if (answer instanceof Error) throw answer;
      return answer;
    },
    ttlMs,
    (c) => changes.push(c),
    () => clock,
  );
  return {
    p,
    changes,
    reads: () => reads,
    advance: (ms: number) => (clock += ms),
    gate,
    release: () => pending.splice(0).forEach((r) => r()),
  };
}

describe('DroidVersionProbe', () => {
  it('reads once, serves the cached version within the TTL, and reads again after it', async () => {
    const t = probe(['0.225.2']);
    expect(await t.p.current()).toBe('0.225.2');
    t.advance(999);
    expect(await t.p.current()).toBe('0.225.2');
    expect(t.reads()).toBe(1);
    t.advance(1);
    expect(await t.p.current()).toBe('0.225.2');
    expect(t.reads()).toBe(2);
    // Reported once: the first read; an unchanged version is not news.
    expect(t.changes).toEqual([{ version: '0.225.2', previous: undefined }]);
  });

  it('concurrent callers share one read', async () => {
    const t = probe(['0.215.0']);
    t.gate.hold = true;
    const calls = [t.p.current(), t.p.current(), t.p.current()];
    await Promise.resolve();
    t.release();
    expect(await Promise.all(calls)).toEqual(['0.215.0', '0.215.0', '0.215.0']);
    expect(t.reads()).toBe(1);
  });

  it('an unreadable version is null with its reason, and a later read can recover; every change is reported', async () => {
    const err = new DroidError('droid_version_unreadable', 'droid --version printed "", not a version number');
    const t = probe([err, '0.215.0', '0.225.2']);
    expect(await t.p.current()).toBeNull();
    t.advance(1_000);
    expect(await t.p.current()).toBe('0.215.0');
    t.advance(1_000);
    expect(await t.p.current()).toBe('0.225.2');
    expect(t.changes).toEqual([
      { version: null, previous: undefined, error: err },
      { version: '0.215.0', previous: null },
      { version: '0.225.2', previous: '0.215.0' },
    ]);
  });
});
