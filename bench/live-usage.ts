/**
 * Live usage (issue 22): durable writes per turn with live usage on vs off,
 * and two status JSONs for the record: a running turn showing its usage so
 * far, and a turn stopped at its token ceiling (how far past it went).
 *
 * The same slow turn (12 model steps, ~1.5 s each) runs twice through the
 * built server over stdio: once with the scripted model reporting usage on
 * every step (droid then sends session_token_usage_changed after each, so
 * live usage is on), once with no usage reported (nothing live to write).
 * A durable write is one journal line (one fdatasynced commit); the naive
 * figure is one write per usage report.
 *
 * Run: npm run build && node dist/bench/live-usage.js
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { script } from '../src/testbed/scripted-model.js';
import { tokensOf } from '../src/shared/budget.js';
import type { TokenUsage } from '../src/shared/records.js';
import { makeDroidBed } from '../test/support/droid-home.js';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';

const STEPS = 12;
const STEP_MS = 1_500;

interface View {
  agentState: string;
  latestRun: { state: string; usage: Record<string, number | boolean | null> | null; limit: unknown; error: unknown };
}

function prompt(dir: string, usage: boolean, steps = STEPS, slowMs = STEP_MS): string {
  // Each call differs from the last: droid ends a turn whose model repeats one tool call.
  const ls = (i: number) => ({ name: 'LS', arguments: { directory_path: i % 2 ? dir : `${dir}/sub` } });
  return `work ${script({ steps: Array.from({ length: steps }, (_, i) => ls(i)), slowMs, ...(usage ? { usage: { prompt_tokens: 100, completion_tokens: 10 } } : {}) })}`;
}

function journalLines(stateDir: string): number {
  try {
    return readFileSync(join(stateDir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** The run's view without its event log (tool output), which says nothing about usage. */
function brief(run: View['latestRun'] | undefined): unknown {
  if (!run) return null;
  const { events, ...rest } = run as View['latestRun'] & { events?: unknown[] };
  return { ...rest, events: `${events?.length ?? 0} progress events` };
}

async function status(server: RunningServer, session: string): Promise<View> {
  return (await server.ok<{ status: View }>('droid_get_session_status', { session })).status;
}

async function settle(server: RunningServer, session: string): Promise<View> {
  for (;;) {
    const waited = await server.ok<{ sessions: View[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    if (!waited.timedOut) return waited.sessions[0]!;
  }
}

/** One turn: journal lines it added, usage reports seen (distinct running figures polled), and a mid-turn status. */
async function oneTurn(server: RunningServer, stateDir: string, workspace: string, usage: boolean, key: string) {
  const before = journalLines(stateDir);
  const a = await server.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: key,
    replyTo: null,
    autonomy: 'high',
    workspace,
    prompt: prompt(workspace, usage),
  });
  let midTurn: View | undefined;
  const figures = new Set<string>();
  for (let v = await status(server, a.metadata.session); v.agentState === 'working'; v = await status(server, a.metadata.session)) {
    if (v.latestRun.usage) figures.add(JSON.stringify(v.latestRun.usage));
    if (v.latestRun.usage && figures.size >= 4) midTurn ??= v;
    await new Promise((r) => setTimeout(r, 100));
  }
  const done = await settle(server, a.metadata.session);
  // Anything the turn's owner writes after the wait settles (none expected) is counted too.
  await new Promise((r) => setTimeout(r, 1_000));
  return { writes: journalLines(stateDir) - before, reports: figures.size, midTurn, done };
}

export async function main(): Promise<void> {
  const bed = await makeDroidBed();
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-usage-')));
  const approved = join(root, 'approved');
  mkdirSync(join(approved, 'ws', 'sub'), { recursive: true });
  const stateDir = join(root, 'state');
  const config = writeConfig(root, { approvedDirectories: [approved], stateDirectory: stateDir, droidPath: bed.droidPath, defaultModel: bed.modelId });
  const server = await startServer(config, bed.home.env);
  try {
    const workspace = join(approved, 'ws');
    const on = await oneTurn(server, stateDir, workspace, true, 'bench-usage-on');
    const off = await oneTurn(server, stateDir, workspace, false, 'bench-usage-off');
    console.log(`turn of ${STEPS} model steps, ~${(STEPS * STEP_MS) / 1000} s:`);
    console.log(
      `  live usage on:  ${on.writes} durable writes (journal lines) for the turn, ${on.reports} running figures seen; one write per report would add ${STEPS + 1}`,
    );
    console.log(`  live usage off: ${off.writes} durable writes for the turn`);
    console.log(`  extra writes from live usage: ${on.writes - off.writes} (first figure at once, then at most one per 10 s)`);
    console.log('status of the running turn (latestRun):');
    console.log(JSON.stringify(brief(on.midTurn?.latestRun), null, 2));

    const capped = await server.ok<{ metadata: { session: string } }>('droid_create_session', {
      requestKey: 'bench-usage-cap',
      replyTo: null,
      autonomy: 'high',
      workspace,
      prompt: prompt(workspace, true, 12, 300),
      budget: { maxTokens: 250 },
    });
    const stopped = await settle(server, capped.metadata.session);
    const spent = tokensOf(stopped.latestRun.usage as unknown as TokenUsage);
    console.log(`turn with budget {maxTokens: 250}: ${stopped.latestRun.state}, spent ${spent} tokens, ${spent - 250} past the limit (one step is 110)`);
    console.log(JSON.stringify(brief(stopped.latestRun), null, 2));
  } finally {
    await server.close();
    await bed.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
