import { spawn } from 'node:child_process';
import { existsSync, lutimesSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { settingsAlreadyApplied } from '../../../../src/droid/client.js';
import { lossBackoffMs, refillCount } from '../../../../src/worker/parent/warm-pool.js';
import { projectFactoryCandidates, warmFits } from '../../../../src/worker/child/warm-droid.js';
import { staleWarmFolders, sweepWarmFolders, WARM_DIR_MIN_AGE_MS } from '../../../../src/worker/parent/warm-folders.js';

const warm = { droidPath: '/bin/droid', droidEnv: { HOME: '/h', PATH: '/bin' }, dir: '/tmp/droid-mcp-warm-x' };
const unconfined = { sandbox: { mode: 'off' as const }, droidPath: '/bin/droid', droidEnv: { PATH: '/bin', HOME: '/h' } };

describe('warmFits: a turn uses a warm droid only when nothing differs from a cold start', () => {
  it('fits an unconfined turn with the same droid and environment', () => {
    expect(warmFits(warm, true, unconfined)).toBe(true);
  });
  it('never fits a sandboxed turn: bubblewrap binds are fixed at spawn', () => {
    expect(warmFits(warm, true, { ...unconfined, sandbox: { mode: 'bwrap', bwrapPath: '/usr/bin/bwrap', hiddenDirs: [], hiddenFiles: [] } })).toBe(false);
  });
  it('never fits a dead droid, another executable, or any difference in the environment', () => {
    expect(warmFits(warm, false, unconfined)).toBe(false);
    expect(warmFits(warm, true, { ...unconfined, droidPath: '/other/droid' })).toBe(false);
    expect(warmFits(warm, true, { ...unconfined, droidEnv: { PATH: '/bin', HOME: '/other' } })).toBe(false);
    expect(warmFits(warm, true, { ...unconfined, droidEnv: { PATH: '/bin' } })).toBe(false);
    expect(warmFits(warm, true, { ...unconfined, droidEnv: { PATH: '/bin', HOME: '/h', EXTRA: '1' } })).toBe(false);
  });
});

describe('projectFactoryCandidates', () => {
  it('lists every ancestor .factory up to /, except the user-level one', () => {
    expect(projectFactoryCandidates('/home/u/src/app', '/home/u/.factory')).toEqual([
      '/home/u/src/app/.factory',
      '/home/u/src/.factory',
      '/home/.factory',
      '/.factory',
    ]);
    expect(projectFactoryCandidates('/', '/h/.factory')).toEqual(['/.factory']);
  });
});

describe('pool refill rules', () => {
  it('tops up to the size, never above, and not while closed or backing off', () => {
    expect(refillCount({ size: 2, held: 0, closed: false, backingOff: false })).toBe(2);
    expect(refillCount({ size: 2, held: 2, closed: false, backingOff: false })).toBe(0);
    expect(refillCount({ size: 1, held: 3, closed: false, backingOff: false })).toBe(0);
    expect(refillCount({ size: 2, held: 0, closed: true, backingOff: false })).toBe(0);
    expect(refillCount({ size: 2, held: 0, closed: false, backingOff: true })).toBe(0);
    expect(refillCount({ size: 0, held: 0, closed: false, backingOff: false })).toBe(0);
  });
  it('backs off after repeated losses: none, then 1 s doubling to 60 s', () => {
    expect([0, 1, 2, 3, 7, 20].map(lossBackoffMs)).toEqual([0, 1_000, 2_000, 4_000, 60_000, 60_000]);
  });
});

describe('settingsAlreadyApplied: a follow-up skips update_session_settings only when nothing would change', () => {
  const reported = { modelId: 'm', reasoningEffort: 'none', autonomyLevel: 'off', interactionMode: 'spec', autonomyMode: 'spec' };
  it('skips when every defined value is already reported', () => {
    expect(settingsAlreadyApplied(reported, { modelId: 'm', autonomyLevel: 'off', interactionMode: 'spec' })).toBe(true);
    expect(settingsAlreadyApplied(reported, { modelId: 'm', reasoningEffort: undefined, autonomyLevel: 'off', interactionMode: 'spec' })).toBe(true);
  });
  it('sends when anything differs or droid reported nothing', () => {
    expect(settingsAlreadyApplied(reported, { modelId: 'm', autonomyLevel: 'high', interactionMode: 'auto' })).toBe(false);
    expect(settingsAlreadyApplied(reported, { modelId: 'other', autonomyLevel: 'off', interactionMode: 'spec' })).toBe(false);
    expect(settingsAlreadyApplied(reported, { modelId: 'm', reasoningEffort: 'high', autonomyLevel: 'off', interactionMode: 'spec' })).toBe(false);
    expect(settingsAlreadyApplied(undefined, { modelId: 'm', autonomyLevel: 'off', interactionMode: 'spec' })).toBe(false);
  });
});

describe('warm folders a killed controller left behind', () => {
  const now = 10 * 60_000;
  it('staleWarmFolders: only folders past the age bound that no live process is in (or under)', () => {
    const entries = [
      { path: '/t/droid-mcp-warm-old', mtimeMs: now - WARM_DIR_MIN_AGE_MS },
      { path: '/t/droid-mcp-warm-young', mtimeMs: now - WARM_DIR_MIN_AGE_MS + 1 },
      { path: '/t/droid-mcp-warm-used', mtimeMs: 0 },
      { path: '/t/droid-mcp-warm-below', mtimeMs: 0 },
      { path: '/t/droid-mcp-warm-prefix', mtimeMs: 0 },
    ];
    const cwds = new Set(['/t/droid-mcp-warm-used', '/t/droid-mcp-warm-below/sub', '/t/droid-mcp-warm-prefixed']);
    expect(staleWarmFolders(entries, cwds, now)).toEqual(['/t/droid-mcp-warm-old', '/t/droid-mcp-warm-prefix']);
  });

  it('sweepWarmFolders removes a stale folder, keeps one a live process is in, a young one and a symlink', async () => {
    const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'sweep-')));
    const make = (name: string) => {
      const path = join(tmp, name);
      mkdirSync(path);
      writeFileSync(join(path, 'f'), 'x');
      return path;
    };
    const stale = make('droid-mcp-warm-stale');
    const used = make('droid-mcp-warm-used');
    const young = make('droid-mcp-warm-young');
    const other = make('unrelated');
    symlinkSync(other, join(tmp, 'droid-mcp-warm-link'));
    const old = new Date(Date.now() - 2 * WARM_DIR_MIN_AGE_MS);
    for (const p of [stale, used, other]) utimesSync(p, old, old);
    lutimesSync(join(tmp, 'droid-mcp-warm-link'), old, old);
    const sleeper = spawn('sleep', ['30'], { cwd: used, stdio: 'ignore' });
    try {
      await new Promise((r) => sleeper.once('spawn', r));
      expect(sweepWarmFolders(tmp)).toEqual([stale]);
      expect([stale, used, young, other, join(tmp, 'droid-mcp-warm-link')].map((p) => existsSync(p))).toEqual([false, true, true, true, true]);
    } finally {
      sleeper.kill('SIGKILL');
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
