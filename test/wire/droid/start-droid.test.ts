/**
 * Stopping a droid whose spawn failed must not signal anything else: such a
 * child has no pid, and a kill sent anyway can reach pid 0, the caller's own
 * process group (a worker and everything in it).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/paths.js';

describe('droid/start-droid.ts', () => {
  it('killing a droid whose spawn failed leaves the caller and its group alone', () => {
    // Its own process group, so a kill that escapes reaches only it.
    const script = `
      import { startDroid } from '${REPO_ROOT}/dist/src/droid/start-droid.js';
      const started = startDroid({ droidPath: '/nonexistent/droid', env: {} });
      started.kill('SIGKILL');
      const end = await started.ended;
      started.kill('SIGKILL');
      console.log(end.kind);
    `;
    const run = spawnSync('setsid', [process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect({ signal: run.signal, status: run.status, out: run.stdout.trim() }).toEqual({ signal: null, status: 0, out: 'error' });
  });
});
