/**
 * Issue 37: what a hostile turn reads and whom it talks to, with the real
 * droid CLI at `high` and scripted Execute commands. The sandbox is the one
 * the server builds from its config (hostSandboxSpec): droid in its own
 * network namespace behind its turn's proxy, the homes, the approved roots
 * and the host's data folders covered. Each check looks at the host.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostSandboxSpec } from '../../src/sandbox/sandbox.js';
import type { TurnSpec } from '../../src/worker/shared/protocol.js';
import { script } from '../../src/testbed/scripted-model.js';
import { waitForNoProcesses } from '../support/processes.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from './harness.js';

const BWRAP = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
const real = useRealDroid();
let root: string;
let tag: string;
const cleanups: Array<() => void> = [];

interface Bed {
  spec: TurnSpec;
  workspace: string;
  otherRoot: string;
}

function bed(network: { mode: 'proxy' | 'open'; allow: string[] } = { mode: 'proxy', allow: [] }, over: Partial<TurnSpec> = {}): Bed {
  tag = newTag();
  root = realpathSync(mkdtempSync(join(tmpdir(), 'egress-')));
  const approved = [join(root, 'team-a'), join(root, 'team-b')];
  const workspace = join(approved[0]!, 'project');
  const otherRoot = approved[1]!;
  const stateDirectory = join(root, 'state');
  for (const dir of [workspace, otherRoot, stateDirectory]) mkdirSync(dir, { recursive: true });
  const sandbox = hostSandboxSpec(BWRAP, { stateDirectory, approvedDirectories: approved, network, sandboxReadable: [] }, real.bed.home.env);
  const spec = realDroidSpec(real.bed, tag, { workspace, autonomy: 'high', ...over });
  spec.sandbox = sandbox;
  return { spec, workspace, otherRoot };
}

afterEach(async () => {
  while (cleanups.length) cleanups.pop()!();
  await waitForNoProcesses(tag, 10_000);
  rmSync(root, { recursive: true, force: true });
});

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });

describe('egress', () => {
  it('a plain turn works behind the proxy', async () => {
    const b = bed();
    b.spec.prompt = `run ${script({ tool: execute('echo HELLO-$HTTPS_PROXY') })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    console.log(JSON.stringify({ ...result, transcript: undefined }, null, 1).slice(0, 4000));
    expect(result.outcome).toBe('succeeded');
  });
});
