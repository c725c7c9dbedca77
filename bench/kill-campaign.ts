/**
 * Kill -9 campaign (issue 38, item 3): does anything a killed server started
 * outlive it, and does the next server on the same state admit a turn while
 * it does?
 *
 * Each round: the built server (stdio, bwrap, the default network proxy, the
 * real droid, the scripted model) is sent `droid_create_session` and killed
 * with SIGKILL 10–120 ms later, while the turn starts. Four kinds of round,
 * in turn: the warm pool's worker takes the turn (the pool is waited for) or
 * a cold one is forked (`warmPoolSize: 0`); the catalog is cached (the
 * server is the previous round's next start, which ran a turn) or read
 * by this create (a fresh server: a short-lived droid in bwrap, a child of
 * the server, starts in the same window). At once the next server starts on the same state
 * directory, as a supervisor would restart it. Meanwhile /proc is scanned
 * every 10 ms for every process of the killed server's tree (its tag in the
 * environment, or a group one of them leads: src/testbed/tree-watch.ts).
 * Recorded per round:
 *  - what still ran 1 s after the kill, and the longest any process lived;
 *  - model requests of the killed turn (its marker) that arrived after the kill;
 *  - the next server: a session created as soon as it answers; its turn's
 *    `startedAt` (admission) against the last moment a process of the killed
 *    tree was seen running. Admitted before that is a violation.
 *
 * Run: npm run build && node dist/bench/kill-campaign.js [rounds]
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeDroidBed, type DroidBed } from '../test/support/droid-home.js';
import { writeConfig } from '../test/support/mcp-server.js';
import { McpDriver } from '../src/testbed/mcp-driver.js';
import { script } from '../src/testbed/scripted-model.js';
import { TreeWatch, watchTree, type TreeReport, type WatchedProcess } from '../src/testbed/tree-watch.js';
import { WARM_IDLE_TITLE } from '../src/worker/contract/worker-process.js';
import { processesTagged } from '../src/testbed/processes.js';

const DEFAULT_ROUNDS = 30;
const TAG_VAR = 'DROID_MCP_TEST_TAG';
/** The bound of the goal: nothing of a killed server runs this long after the kill. */
const BOUND_MS = 1_000;

interface Server {
  mcp: McpDriver;
  pid: number;
  tag: string;
  pool: boolean;
  stderr: string[];
}

interface Round {
  round: number;
  pool: boolean;
  catalogRead: boolean;
  afterAnswer: boolean;
  delayMs: number;
  answeredBeforeKill: boolean;
  tree: TreeReport;
  seen: WatchedProcess[];
  requestsAfterKill: number;
  requestsAfterKillMs: number[];
  /** The next server's turn: admitted (startedAt) minus the last time a killed-tree process was seen running; null when none ran after the kill or no admission was seen. */
  admittedAfterLastAliveMs: number | null;
  violation: boolean;
  nextNote: string;
}

let serial = 0;

async function startServerOn(bed: DroidBed, root: string, approved: string, pool: boolean): Promise<Server> {
  const tag = `kill-campaign-${process.pid}-${++serial}`;
  const config = writeConfig(root, {
    approvedDirectories: [approved],
    stateDirectory: join(root, 'state'),
    droidPath: bed.droidPath,
    defaultModel: bed.modelId,
    warmPoolSize: pool ? 1 : 0,
  });
  const stderr: string[] = [];
  const mcp = await McpDriver.stdio(config, { ...bed.home.env, [TAG_VAR]: tag, DROID_MCP_LOG_LEVEL: 'info' }, (c) => {
    stderr.push(c);
    if (stderr.length > 200) stderr.splice(0, 100);
  });
  // Tool calls wait until the state is open: the create must find the controller up.
  await mcp.ok('droid_list_workspaces');
  return { mcp, pid: mcp.pid ?? -1, tag, pool, stderr };
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return '';
  }
}

/** Until the pool's worker is idle and has had time for its warm message (the throwaway spawn). */
async function poolReady(server: Server): Promise<void> {
  const end = Date.now() + 15_000;
  while (!processesTagged(TAG_VAR, server.tag).some((pid) => cmdline(pid).startsWith(WARM_IDLE_TITLE))) {
    if (Date.now() > end) throw new Error('the warm pool never filled');
    await sleep(50);
  }
  await sleep(400);
}

async function createSession(mcp: McpDriver, approved: string, name: string, marker: string): Promise<{ session: string } | { refused: string }> {
  const ws = join(approved, name);
  mkdirSync(ws, { recursive: true });
  const created = await mcp.call('droid_create_session', {
    requestKey: `create-${name}`,
    workspace: ws,
    prompt: `${marker} ${script({ text: 'done' })}`,
    autonomy: 'off',
    replyTo: null,
  });
  if (created.isError) return { refused: created.text.slice(0, 300) };
  return { session: (created.structured as { metadata: { session: string } }).metadata.session };
}

/** When the session's turn was admitted (its startedAt, epoch ms), polled until it has one. */
async function admittedAt(mcp: McpDriver, session: string): Promise<number | null> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const status = await mcp.ok<{ status: { latestRun: { startedAt: string | null; state: string } | null } }>('droid_get_session_status', { session });
    const run = status.status.latestRun;
    if (run?.startedAt) return Date.parse(run.startedAt);
    if (run && run.state !== 'queued') return null;
    await sleep(10);
  }
  return null;
}

const killedMarker = (round: number) => `killed-turn-${process.pid}-${round}`;

/**
 * Round kinds, in turn: pool or cold worker; catalog cached or read by the
 * killed create. With a catalog read the pool round is killed while it reads
 * (its short-lived droid starting), the cold one after the create's answer
 * (the turn starting on a fresh server).
 */
const kindOfRound = (round: number) => ({ pool: round % 2 === 0, catalogRead: round % 4 >= 2, afterAnswer: round % 4 === 3 });

async function oneRound(bed: DroidBed, root: string, approved: string, previous: Server, round: number): Promise<{ round: Round; next: Server }> {
  const { pool, catalogRead, afterAnswer } = kindOfRound(round);
  let server = previous;
  if (catalogRead || server.pool !== pool) {
    await previous.mcp.closeWhenIdle();
    server = await startServerOn(bed, root, approved, pool);
  }
  if (server.pool) await poolReady(server);
  const delayMs = 10 + ((round * 47) % 111);
  const marker = killedMarker(round);
  let answered = false;
  let onAnswer = () => undefined as void;
  const answer = new Promise<void>((resolve) => (onAnswer = resolve));
  const create = createSession(server.mcp, approved, `killed-${round}`, marker).then(
    () => ((answered = true), onAnswer()),
    () => undefined,
  );
  // Cold rounds after a fresh server's first create: the delay counts from the answer (the catalog read came first).
  if (afterAnswer) await answer;
  await sleep(delayMs);
  const killAt = Date.now();
  process.kill(server.pid, 'SIGKILL');
  const answeredBeforeKill = answered;
  const watch = new TreeWatch(TAG_VAR, server.tag);
  const treeDone = watchTree(watch, killAt, { boundMs: BOUND_MS, giveUpMs: 15_000 });
  const next = await startServerOn(bed, root, approved, kindOfRound(round + 1).pool);
  const created = await createSession(next.mcp, approved, `probe-${round}`, `probe-${process.pid}-${round}`);
  const probe = 'session' in created ? created : null;
  const admitted = probe ? await admittedAt(next.mcp, probe.session) : null;
  const tree = await treeDone;
  await create;
  await server.mcp.close().catch(() => undefined);
  // Whatever still runs is killed here, so one round does not leak into the next.
  for (const p of tree.left) killQuietly(p.pid);
  if (probe) await next.mcp.ok('droid_wait_for_sessions', { sessions: [probe.session], timeoutSeconds: 60 });
  const after = [...bed.model.requests, ...bed.model.titleRequests].filter((r) => r.at > killAt && JSON.stringify(r.messages).includes(marker));
  const gap = admitted !== null && tree.lastAlive !== null ? admitted - tree.lastAlive : null;
  const nextNote = !probe
    ? `create refused: ${'refused' in created ? created.refused : ''}`
    : admitted === null
      ? 'no admission seen'
      : tree.lastAlive === null
        ? 'nothing ran after the kill'
        : `admitted ${gap} ms after the last old process`;
  return {
    round: {
      round,
      pool: server.pool,
      catalogRead,
      afterAnswer,
      delayMs,
      answeredBeforeKill,
      tree,
      seen: watch.all(),
      requestsAfterKill: after.length,
      requestsAfterKillMs: after.map((r) => r.at - killAt),
      admittedAfterLastAliveMs: gap,
      violation: gap !== null && gap < 0,
      nextNote,
    },
    next,
  };
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

/** kind:pid, its group's leader when that is not itself, and `^1` when its parent died first. */
function names(ps: readonly WatchedProcess[], all: readonly WatchedProcess[]): string {
  const leader = (p: WatchedProcess) => (p.pgid === p.pid ? '' : `/g:${all.find((q) => q.pid === p.pgid)?.kind ?? '?'}${p.pgid}`);
  return ps.map((p) => `${p.kind}:${p.pid}${leader(p)}${p.ppid === 1 ? '^1' : ''}`).join(' ') || '-';
}

function printRound(r: Round): void {
  console.log(
    `  #${String(r.round).padStart(2)} ${r.pool ? 'pool' : 'cold'}${r.catalogRead ? '+catalog' : '        '} kill +${String(r.delayMs).padStart(3)} ms ${r.afterAnswer ? 'after answer' : r.answeredBeforeKill ? '(answered)  ' : '            '}` +
      `  alive@1s ${String(r.tree.aliveAtBound.length).padStart(2)} [${names(r.tree.aliveAtBound, r.seen)}]  max ${String(r.tree.maxSurvivalMs).padStart(5)} ms` +
      `  model after kill ${r.requestsAfterKill}${r.requestsAfterKill ? ` (+${r.requestsAfterKillMs.join(', +')} ms)` : ''}  next: ${r.nextNote}${r.violation ? '  VIOLATION' : ''}`,
  );
}

function printSummary(rounds: readonly Round[]): void {
  const withSurvivors = rounds.filter((r) => r.tree.aliveAtBound.length > 0);
  const kinds = new Map<string, number>();
  for (const r of withSurvivors) for (const p of r.tree.aliveAtBound) kinds.set(p.kind, (kinds.get(p.kind) ?? 0) + 1);
  const reached = rounds.filter((r) => r.requestsAfterKill > 0);
  const count = (pick: (r: Round) => boolean) => rounds.filter(pick).length;
  console.log(
    `kill campaign: ${rounds.length} rounds (${count((r) => r.pool)} pool, ${count((r) => !r.pool)} cold; ${count((r) => r.catalogRead)} with a catalog read), kill 10–120 ms after create`,
  );
  console.log(`  rounds with a process alive 1 s after the kill: ${withSurvivors.length} (${[...kinds].map(([k, n]) => `${k} ×${n}`).join(', ') || 'none'})`);
  console.log(`  longest survival after the kill: ${Math.max(0, ...rounds.map((r) => r.tree.maxSurvivalMs))} ms`);
  console.log(
    `  rounds whose killed turn reached the model after the kill: ${reached.length} (${reached.reduce((n, r) => n + r.requestsAfterKill, 0)} requests)`,
  );
  console.log(`  next start admitted a turn while an old process ran: ${rounds.filter((r) => r.violation).length} rounds`);
  const notes = new Map<string, number>();
  for (const r of rounds) {
    const key = r.nextNote.startsWith('admitted')
      ? r.violation
        ? 'admitted before the old tree was gone'
        : 'admitted after the old tree was gone'
      : r.nextNote;
    notes.set(key, (notes.get(key) ?? 0) + 1);
  }
  console.log(`  next start: ${[...notes].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
}

export async function main(rounds = DEFAULT_ROUNDS): Promise<Round[]> {
  const bed = await makeDroidBed();
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-kill-')));
  const approved = join(root, 'approved');
  mkdirSync(approved);
  const results: Round[] = [];
  let server = await startServerOn(bed, root, approved, kindOfRound(0).pool);
  try {
    for (let i = 0; i < rounds; i++) {
      const { round, next } = await oneRound(bed, root, approved, server, i);
      printRound(round);
      results.push(round);
      server = next;
    }
    printSummary(results);
  } finally {
    await server.mcp.closeWhenIdle().catch(() => undefined);
    await bed.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(Number(process.argv[2] ?? DEFAULT_ROUNDS)).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
