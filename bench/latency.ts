/**
 * Start-up latency, printed as medians of 10 runs:
 *  - bare droid: spawn → `initialize_session` answered (the floor);
 *  - our worker: fork → prompt submitted (`started` reported), unconfined
 *    and inside the bubblewrap sandbox (when bwrap is installed);
 *  - the server: `droid_create_session` called → run observed `running`
 *    (prompt submitted), through the MCP SDK client over stdio.
 * Ratios to the bare figure are what matter on a noisy 2-core machine.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DroidClient } from '../src/droid/client.js';
import { startWorker } from '../src/worker/runner.js';
import type { SandboxSpec } from '../src/worker/sandbox.js';
import { execFileSync } from 'node:child_process';
import { makeDroidBed, type DroidBed } from '../test/support/droid-home.js';
import { script } from '../test/support/model-server.js';
import { startServer, writeConfig } from '../test/support/mcp-server.js';
import { WORKER_ENTRY } from '../test/support/paths.js';

const RUNS = 10;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function bareDroid(bed: DroidBed, cwd: string): Promise<number> {
  const t0 = performance.now();
  const client = DroidClient.spawn({ droidPath: bed.droidPath, env: bed.home.env });
  await client.initializeSession({ machineId: 'bench', cwd, modelId: bed.modelId, autonomyLevel: 'off', interactionMode: 'spec' });
  const elapsed = performance.now() - t0;
  await client.shutdown();
  return elapsed;
}

async function worker(bed: DroidBed, cwd: string, i: number, sandbox: SandboxSpec): Promise<number> {
  const t0 = performance.now();
  let submitted = 0;
  const handle = startWorker(
    {
      runId: `bench-${i}`,
      workspace: cwd,
      droidPath: bed.droidPath,
      droidEnv: bed.home.env,
      session: { mode: 'create' },
      model: bed.modelId,
      autonomy: 'off',
      prompt: `bench ${script({ text: 'ok' })}`,
      timeoutMs: 60_000,
      graceMs: 2_000,
      sandbox,
    },
    { workerEntry: WORKER_ENTRY, onStarted: () => (submitted = performance.now() - t0) },
  );
  await handle.result;
  handle.acknowledge();
  await handle.cleanedUp;
  return submitted;
}

async function server(bed: DroidBed, root: string): Promise<number[]> {
  const stateDir = join(root, 'state');
  const config = writeConfig(root, { approvedDirectories: [root], stateDirectory: stateDir, droidPath: bed.droidPath, defaultModel: bed.modelId });
  const mcp = await startServer(config, bed.home.env);
  await mcp.ok('droid_models'); // the catalog probe is not part of a turn's start-up
  const samples: number[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      const ws = join(root, `ws-${i}`);
      mkdirSync(ws);
      const t0 = performance.now();
      const accepted = await mcp.ok<{ metadata: { session: string } }>('droid_create_session', {
        requestKey: `bench-${i}`,
        workspace: ws,
        prompt: `bench ${script({ text: 'ok' })}`,
        autonomy: 'off',
        replyTo: null,
      });
      for (;;) {
        const { status } = await mcp.ok<{ status: { latestRun: { state: string } } }>('droid_get_session_status', { session: accepted.metadata.session });
        if (status.latestRun.state !== 'queued' && status.latestRun.state !== 'starting') break;
        await new Promise((r) => setTimeout(r, 2));
      }
      samples.push(performance.now() - t0);
      await mcp.ok('droid_wait_for_sessions', { sessions: [accepted.metadata.session], timeoutSeconds: 60 });
    }
  } finally {
    await mcp.close();
  }
  return samples;
}

function findBwrap(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

export async function main(): Promise<void> {
  const bed = await makeDroidBed();
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-')));
  try {
    const bwrapPath = findBwrap();
    const bare: number[] = [];
    const viaWorker: number[] = [];
    const viaSandbox: number[] = [];
    // Interleaved, so machine noise hits every variant alike.
    for (let i = 0; i < RUNS; i++) {
      bare.push(await bareDroid(bed, root));
      viaWorker.push(await worker(bed, root, i, { mode: 'off' }));
      if (bwrapPath) viaSandbox.push(await worker(bed, root, i, { mode: 'bwrap', bwrapPath, hiddenDirs: [], hiddenFiles: [] }));
    }
    const viaServer = await server(bed, root);
    const b = median(bare);
    const rows: Array<[string, number]> = [
      ['bare droid spawn → initialize_session answered', b],
      ['worker fork → prompt submitted (no sandbox)', median(viaWorker)],
      ...(bwrapPath ? [['worker fork → prompt submitted (bwrap sandbox)', median(viaSandbox)] as [string, number]] : []),
      [`server create → prompt submitted (running, sandbox ${bwrapPath ? 'bwrap' : 'unavailable'})`, median(viaServer)],
    ];
    console.log(`start-up latency, median of ${RUNS} runs`);
    for (const [label, ms] of rows) console.log(`  ${label.padEnd(62)} ${ms.toFixed(0).padStart(6)} ms   ratio ${(ms / b).toFixed(2)}`);
    if (bwrapPath) console.log(`  sandbox cost: bwrap / no sandbox = ${(median(viaSandbox) / median(viaWorker)).toFixed(2)}`);
    else console.log('  bwrap not installed: sandboxed start-up not measured');
  } finally {
    await bed.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
