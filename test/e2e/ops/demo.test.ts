/**
 * `npm run demo` (the README's first command) as a new user runs it: the
 * built CLI's `droid-mcp demo`, offline, with a private TMPDIR so everything
 * it creates can be seen to be gone afterwards, and a process tag to prove
 * nothing outlives it.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { privateDir } from '../../support/mcp-server.js';
import { SERVER_ENTRY } from '../../support/paths.js';
import { TAG_VAR, waitForNoProcesses } from '../../support/processes.js';
import { leftBehind } from '../../support/assertions.js';

function runDemo(args: string[], tmp: string, tag: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY, 'demo', ...args], {
      env: { ...process.env, TMPDIR: tmp, [TAG_VAR]: tag },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

let tmp: string | undefined;
afterEach(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});

describe('npm run demo', () => {
  it('runs every step against the built server, prints a readable transcript, and leaves nothing behind', async () => {
    tmp = privateDir('droid-mcp-demo-test-');
    const tag = `demo-${randomUUID()}`;
    const { code, stdout, stderr } = await runDemo([], tmp, tag);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    const lines = [
      /started the server: node dist\/src\/cli\.js --config .*\(pid \d+\), MCP over stdio/,
      /tools\/list → 11 tools/,
      /droid_list_workspaces → roots .*\/approved; capacity 0\/4; default model custom:Demo-Model-0/,
      /droid_models → \d+ models/,
      /custom \(BYOK\): custom:Demo-Model-0 "Demo Model"/,
      // The first turn is admitted at once and already reads starting.
      /→ session [0-9a-f]{8}, run [0-9a-f]{8}: started \(admitted at once; droid is starting\); latestRun\.state starting/,
      /progress \d+\.\d\/60 s: 0 of 1 settled; working: [0-9a-f]{8} (starting|running)/,
      /notes\.txt now holds "Hello from droid, offline\."/,
      /droid_read_session → \d+ items/,
      /tool_call Create \(done\)/,
      /run [0-9a-f]{8} succeeded: "The notes file is ready\."/,
      /: interrupting \(interrupting: starts once it has stopped; waits for run [0-9a-f-]{36} of this session, being interrupted\)/,
      /succeeded: "Steered: stopped counting\."/,
      /the counting run [0-9a-f]{8} reads: interrupted/,
      /droid_cancel_session [0-9a-f]{8} → run cancelling/,
      /run [0-9a-f]{8} interrupted: "1 2 3/,
      /droid_get_usage \(all sessions\) → 5 turns, [1-9] with usage: [1-9]\d* input, [1-9]\d* output tokens/,
      /no process of this demo is left running/,
      /server log: \d+ lines on stderr, 0 at warn or above, 0 quoting a prompt/,
      // Long operations log at info on stderr with the session handle.
      /info lines naming session [0-9a-f]{8}: turn accepted, turn running: prompt submitted to droid, turn ended, waiting for sessions$/m,
      /^demo done in \d+\.\d s$/m,
    ];
    for (const line of lines) expect(stdout).toMatch(line);
    // The slow turn streamed visibly while it was waited on.
    expect(stdout).toMatch(/progress \d+\.\d\/4 s: 0 of 1 settled; working: [0-9a-f]{8} running: (…)?[\d ]+\n/);
    expect(stdout).toMatch(/→ timedOut \(not a failure: [0-9a-f]{8} still running\)/);
    await waitForNoProcesses(tag, 5_000);
    expect(leftBehind(tmp).join(', ')).toBe('');
  }, 240_000);

  it('a demo that cannot start droid fails plainly, stops everything, and --keep leaves its folder', async () => {
    tmp = privateDir('droid-mcp-demo-test-');
    const tag = `demo-${randomUUID()}`;
    const failed = await runDemo(['--droid', '/bin/false'], tmp, tag);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^demo FAILED: /m);
    expect(leftBehind(tmp)).toEqual([]);

    const kept = await runDemo(['--keep', '--droid', '/bin/false'], tmp, tag);
    expect(kept.code).toBe(1);
    const folder = /kept (\/\S+)/.exec(kept.stdout)?.[1];
    expect(folder, kept.stdout).toBeDefined();
    expect(existsSync(join(folder!, 'droid-home', '.factory', 'settings.json'))).toBe(true);
    expect(readFileSync(join(folder!, 'droid-home', '.factory', 'settings.json'), 'utf8')).toContain('"cloudSessionSync": false');
    await waitForNoProcesses(tag, 5_000);
  });
});
