/**
 * The operator's verification commands, run as an operator runs them but
 * against the pinned droid CLI and the scripted model (src/testbed/) instead
 * of a Factory login, so they cannot rot: `droid-mcp smoke`, `droid-mcp
 * verify-live` and `droid-mcp acceptance` (the built CLI). Their output must
 * be assertions and versions only, and they must leave nothing behind.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, realpathSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customModelId, isolatedEnv, pinnedDroidPath, writeDroidHome } from '../../../src/testbed/droid-home.js';
import { startModelServer, type ModelServer } from '../../../src/testbed/model-server.js';
import { privateDir } from '../../support/mcp-server.js';
import { SERVER_ENTRY } from '../../support/paths.js';
import { TAG_VAR, waitForNoProcesses } from '../../support/processes.js';
import { leftBehind } from '../../support/assertions.js';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

let model: ModelServer;
let base: string;
let home: string;
let workspace: string;
let modelId: string;
const droid = pinnedDroidPath()!;

beforeAll(async () => {
  base = realpathSync(privateDir('droid-mcp-scripts-'));
  home = join(base, 'home');
  workspace = join(base, 'approved');
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(workspace);
  model = await startModelServer();
  await writeDroidHome(home, { baseUrl: model.baseUrl });
  modelId = await customModelId(droid, isolatedEnv(home));
});

afterAll(async () => {
  await model.close();
  rmSync(base, { recursive: true, force: true });
});

/** Runs `droid-mcp <command>` as the service user would: its HOME is the droid home, TMPDIR private. */
async function runScript(command: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; tmp: string }> {
  const tag = `scripts-${randomUUID()}`;
  const tmp = join(base, `tmp-${randomUUID()}`);
  mkdirSync(tmp, { mode: 0o700 });
  const env = isolatedEnv(home, { TMPDIR: tmp, [TAG_VAR]: tag });
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY, command, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
  await waitForNoProcesses(tag, 5_000);
  return { ...result, tmp };
}

function expectSanitized(stdout: string): void {
  expect(stdout).not.toMatch(UUID);
  expect(stdout).not.toMatch(/Reply with exactly|Write the numbers/);
  expect(stdout).toMatch(/droid-mcp \d+\.\d+\.\d+, droid 0\.225\.2, node v\d+/);
}

const common = () => ['--droid', droid, '--model', modelId, '--workspace', workspace];

// Each script runs real turns; on a loaded 2-core host one takes up to a minute or two.
describe('verification scripts against the pinned CLI and the scripted model', { timeout: 240_000 }, () => {
  it('droid-mcp smoke: a two-turn lifecycle in one droid session, sanitized, with disposable state', async () => {
    const { code, stdout, stderr, tmp } = await runScript('smoke', common());
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toContain('ok    turn 1 (droid_create_session) succeeded with the exact reply');
    expect(stdout).toContain('ok    turn 2 (droid_send_message, same session) succeeded with the exact reply');
    expect(stdout).toContain("ok    turn 2 resumed turn 1's droid session");
    expect(stdout).toMatch(/^smoke: 7 passed, 0 failed$/m);
    expectSanitized(stdout);
    expect(leftBehind(tmp)).toEqual([]);
  });

  it('droid-mcp verify-live: two exact results, continuation, a cancelled third turn and cleanup', async () => {
    const { code, stdout, stderr, tmp } = await runScript('verify-live', common());
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toContain('ok    turn 3 reached droid and droid_cancel_session stopped it (interrupted)');
    expect(stdout).toContain('ok    no process of this run is left running');
    expect(stdout).toMatch(/^verify-live: 8 passed, 0 failed$/m);
    expectSanitized(stdout);
    expect(leftBehind(tmp)).toEqual([]);
  });

  it('droid-mcp verify-live never touches a state directory it did not create, and a wrong model fails plainly', async () => {
    const existing = join(base, 'existing-state');
    mkdirSync(existing, { mode: 0o700 });
    writeFileSync(join(existing, 'keep.txt'), 'operator data\n');
    const refused = await runScript('verify-live', [...common(), '--state', existing]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('only uses a state directory it creates itself');
    expect(readdirSync(existing)).toEqual(['keep.txt']);
    expect(readFileSync(join(existing, 'keep.txt'), 'utf8')).toBe('operator data\n');

    const wrong = await runScript('verify-live', ['--droid', droid, '--model', 'no-such-model', '--workspace', workspace]);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain('FAIL  model no-such-model is in the live catalog');
    expect(leftBehind(wrong.tmp)).toEqual([]);
  });

  it('droid-mcp acceptance drives a second instance over HTTP through every tool and prints N passed, M failed', async () => {
    const { code, stdout, stderr, tmp } = await runScript('acceptance', common());
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toMatch(/^acceptance: 20 passed, 0 failed$/m);
    expect(stdout).toContain('ok    requests without the token, or with a wrong one, get HTTP 401');
    for (const tool of [
      'droid_list_workspaces',
      'droid_models',
      'droid_create_session',
      'droid_wait_for_sessions',
      'droid_get_session_status',
      'droid_read_session',
      'droid_send_message',
      'droid_find_sessions',
      'droid_update_session',
      'droid_cancel_session',
      'droid_get_usage',
    ]) {
      expect(stdout).toContain(tool);
    }
    expectSanitized(stdout);
    expect(leftBehind(tmp)).toEqual([]);
  });
});
