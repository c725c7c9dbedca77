/**
 * `droid-mcp demo` (`npm run demo`): the whole product, offline, in one
 * command. The pinned droid CLI from node_modules runs against the scripted
 * model (src/testbed/) on 127.0.0.1, with a private droid home, state
 * directory and approved root in one temporary folder. The built server runs
 * as its own process and is driven over stdio through the MCP SDK client,
 * the way an agent uses it; every call is printed with what came back and
 * how long it took. At the end nothing is left running and the folder is
 * removed (`--keep` leaves it).
 *
 * Options: --keep, --droid PATH (another droid CLI).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  createWriteStream,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
  type WriteStream,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { probeSandbox } from '../sandbox/probe.js';
import { customModelId, isolatedEnv, pinnedDroidPath, writeDroidHome } from '../testbed/droid-home.js';
import { McpDriver } from '../testbed/mcp-driver.js';
import { startModelServer, type ModelServer } from '../testbed/model-server.js';
import { waitUntilNoneTagged } from '../testbed/processes.js';
import { INSTRUCTIONS_HELP } from '../testbed/scripted-model.js';
import { command } from '../ops/command.js';
import { out } from '../ops/output.js';

const TAG_VAR = 'DROID_MCP_DEMO_TAG';
/** droid names the custom model after it: custom:Demo-Model-0. */
const DEMO_MODEL_NAME = 'Demo Model';

interface RunView {
  run: string;
  state: string;
  error: { code: string; message: string } | null;
  events: Array<{ kind: string; detail: string }>;
  usage: { inputTokens: number; outputTokens: number } | null;
}
interface SessionView {
  session: string;
  agentState: string;
  preview: string;
  latestRun: RunView;
}
interface Acceptance {
  metadata: { session: string; run: string };
  admission: { action: string; detail: string };
  status: SessionView;
}

/** Elapsed seconds, for the transcript. */
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const short = (id: string) => id.slice(0, 8);
const quote = (text: string, max = 70) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return JSON.stringify(flat.length > max ? `${flat.slice(0, max)}…` : flat);
};

/** One demo run: its folder, its tag, the prompts it sent (the server log must quote none), and the transcript. */
class DemoRun {
  readonly began = Date.now();
  readonly tag = randomUUID();
  readonly folder = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-demo-')));
  readonly home = join(this.folder, 'droid-home');
  readonly approved = join(this.folder, 'approved');
  readonly project = join(this.approved, 'project');
  readonly scratch = join(this.approved, 'scratch');
  readonly stateDirectory = join(this.folder, 'state');
  readonly serverLog: WriteStream;
  readonly prompts: string[] = [];
  firstSession: string | null = null;

  constructor() {
    chmodSync(this.folder, 0o700);
    for (const dir of [this.home, this.project, this.scratch]) mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.serverLog = createWriteStream(join(this.folder, 'server.log'), { mode: 0o600 });
  }

  prompt(text: string): string {
    this.prompts.push(text);
    return text;
  }

  private stamp(): string {
    return `[${seconds(Date.now() - this.began).padStart(7)}]`;
  }

  say(text: string): void {
    out(`${this.stamp()} ${text}`);
  }

  detail(text: string): void {
    out(`${' '.repeat(this.stamp().length)}   ${text}`);
  }

  accepted(a: Acceptance): void {
    this.detail(
      `→ session ${short(a.metadata.session)}, run ${short(a.metadata.run)}: ${a.admission.action} (${a.admission.detail}); latestRun.state ${a.status.latestRun.state}`,
    );
  }
}

function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir.startsWith('/')) continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Calls droid_wait_for_sessions until they settle, printing its progress
 * notifications; with `once`, a single call that may time out.
 */
async function waitFor(demo: DemoRun, mcp: McpDriver, sessions: string[], timeoutSeconds = 60, once = false): Promise<SessionView[]> {
  const t = Date.now();
  demo.say(`droid_wait_for_sessions ${sessions.map(short).join(', ')}, timeoutSeconds ${timeoutSeconds} (with a progress token)`);
  let last = '';
  for (;;) {
    const waited = await mcp.ok<{ sessions: SessionView[]; timedOut: boolean }>(
      'droid_wait_for_sessions',
      { sessions, timeoutSeconds },
      {
        onprogress: (p) => {
          if (p.message === last) return;
          last = p.message ?? '';
          demo.detail(`progress ${p.progress.toFixed(1)}/${p.total ?? '?'} s: ${p.message ?? ''}`);
        },
      },
    );
    if (once && waited.timedOut) {
      demo.detail(
        `→ timedOut (not a failure: ${waited.sessions.map((v) => `${short(v.session)} still ${v.latestRun.state}`).join(', ')}) (${seconds(Date.now() - t)})`,
      );
      return waited.sessions;
    }
    if (!waited.timedOut) {
      for (const s of waited.sessions) {
        const run = s.latestRun;
        demo.detail(
          `→ ${short(s.session)} ${s.agentState}, run ${short(run.run)} ${run.state}${run.error ? ` (${run.error.code})` : ''}: ${quote(s.preview)} (${seconds(Date.now() - t)})`,
        );
      }
      return waited.sessions;
    }
  }
}

/** Polls droid_get_session_status until the session's latest run reads `running`. */
async function untilRunning(demo: DemoRun, mcp: McpDriver, session: string): Promise<void> {
  const t = Date.now();
  for (let polls = 1; ; polls++) {
    const { status } = await mcp.ok<{ status: SessionView }>('droid_get_session_status', { session });
    if (status.latestRun.state === 'running') {
      demo.say(`droid_get_session_status ${short(session)} → running after ${polls} polls (${seconds(Date.now() - t)})`);
      return;
    }
    if (status.agentState !== 'working') throw new Error(`the turn ended before it ran: ${status.latestRun.state}`);
    await sleep(100);
  }
}

/** The droid home for the scripted model, the config (sandboxed where bwrap works), and the server over stdio. */
async function startServer(demo: DemoRun, droidPath: string, model: ModelServer): Promise<McpDriver> {
  await writeDroidHome(demo.home, { baseUrl: model.baseUrl, displayName: DEMO_MODEL_NAME });
  const env = isolatedEnv(demo.home, { [TAG_VAR]: demo.tag, DROID_MCP_LOG_LEVEL: 'info' });
  const modelId = await customModelId(droidPath, env, DEMO_MODEL_NAME);
  demo.say(`folder ${demo.folder} (droid home, state, approved root)`);
  demo.detail(`droid ${droidPath} (version ${execFileSync(droidPath, ['--version'], { encoding: 'utf8', env, timeout: 10_000 }).trim()})`);
  demo.detail(`scripted model ${model.baseUrl}, droid calls it ${modelId}`);

  const bwrap = process.platform === 'linux' ? findOnPath('bwrap') : null;
  const probe = bwrap
    ? await probeSandbox(bwrap)
    : { ok: false, detail: process.platform === 'linux' ? 'bwrap is not installed' : `no sandbox on ${process.platform}` };
  const config: Record<string, unknown> = { approvedDirectories: [demo.approved], stateDirectory: demo.stateDirectory, droidPath, defaultModel: modelId };
  if (!probe.ok) config.sandbox = 'off';
  demo.detail(probe.ok ? `sandbox bwrap (${bwrap}): each turn writes only its workspace` : `sandbox off: ${probe.detail}`);
  const configPath = join(demo.folder, 'config.json');
  writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });

  const t = Date.now();
  const mcp = await McpDriver.stdio(configPath, env, (chunk) => demo.serverLog.write(chunk));
  demo.say(`started the server: node dist/src/cli.js --config ${configPath} (pid ${mcp.pid}), MCP over stdio (${seconds(Date.now() - t)})`);
  return mcp;
}

/** What an agent sees first: the tools, the roots and policy, droid's catalog. */
async function tour(demo: DemoRun, mcp: McpDriver): Promise<void> {
  const tools = await mcp.listTools();
  demo.detail(`tools/list → ${tools.length} tools: ${tools.join(', ')}`);
  let t = Date.now();
  const ws = await mcp.ok<{
    workspaces: string[];
    capacity: { maximum: number; active: number };
    policy: { defaultModel: string; maxAutonomy: string; sandbox: { mode: string; available: boolean } };
  }>('droid_list_workspaces');
  demo.say(
    `droid_list_workspaces → roots ${ws.workspaces.join(', ')}; capacity ${ws.capacity.active}/${ws.capacity.maximum}; default model ${ws.policy.defaultModel}; max autonomy ${ws.policy.maxAutonomy}; sandbox ${ws.policy.sandbox.mode} (available: ${ws.policy.sandbox.available}) (${seconds(Date.now() - t)})`,
  );
  t = Date.now();
  const models = await mcp.ok<{ models: Array<{ id: string; displayName: string | null }> }>('droid_models');
  const custom = models.models.filter((m) => m.id.startsWith('custom:'));
  demo.say(`droid_models → ${models.models.length} models in droid's live catalog (${seconds(Date.now() - t)})`);
  demo.detail(
    `built in: ${models.models
      .filter((m) => !m.id.startsWith('custom:'))
      .slice(0, 4)
      .map((m) => m.id)
      .join(', ')}, … (need a Factory login)`,
  );
  demo.detail(`custom (BYOK): ${custom.map((m) => `${m.id} "${m.displayName}"`).join(', ')}`);
}

/** 1. A session whose turn writes a file, and its history. */
async function createNotes(demo: DemoRun, mcp: McpDriver): Promise<string> {
  const notes = join(demo.project, 'notes.txt');
  const create = demo.prompt(`Create the file ${notes} containing: Hello from droid, offline.`);
  demo.say(`droid_create_session in ${demo.project}, title "Demo notes", autonomy high: ${quote(create)}`);
  const a = await mcp.ok<Acceptance>('droid_create_session', {
    requestKey: `demo-create-${demo.tag}`,
    workspace: demo.project,
    prompt: create,
    replyTo: null,
    title: 'Demo notes',
    autonomy: 'high',
  });
  demo.accepted(a);
  const session = a.metadata.session;
  demo.firstSession = session;
  await waitFor(demo, mcp, [session]);
  demo.detail(`${notes} now holds ${quote(readFileSync(notes, 'utf8'))}`);

  const t = Date.now();
  const history = await mcp.ok<{ items: Array<{ type: string; tool?: string; status?: string; text?: string; kind?: string }>; nextCursor: string | null }>(
    'droid_read_session',
    { session },
  );
  demo.say(`droid_read_session → ${history.items.length} items (${seconds(Date.now() - t)}):`);
  for (const item of history.items) {
    demo.detail(
      item.type === 'tool_call'
        ? `tool_call ${item.tool} (${item.status})`
        : item.type === 'assistant_text'
          ? `assistant_text ${quote(item.text ?? '')}`
          : `${item.type} ${item.kind ?? ''}`,
    );
  }
  return session;
}

/** 2. A follow-up in the same droid session; 3. steering a slow turn. */
async function followUpAndSteer(demo: DemoRun, mcp: McpDriver, session: string): Promise<void> {
  const follow = demo.prompt('Reply with exactly: The notes file is ready.');
  demo.say(`droid_send_message to ${short(session)}: ${quote(follow)}`);
  demo.accepted(await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-follow-${demo.tag}`, session, prompt: follow }));
  await waitFor(demo, mcp, [session]);

  const slow = demo.prompt('Write the numbers from 1 to 400, one per line.');
  demo.say(`droid_send_message to ${short(session)}: ${quote(slow)} (streams for ~16 s)`);
  const s1 = await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-slow-${demo.tag}`, session, prompt: slow });
  demo.accepted(s1);
  await untilRunning(demo, mcp, session);
  await waitFor(demo, mcp, [session], 4, true);
  const steer = demo.prompt('Reply with exactly: Steered: stopped counting.');
  demo.say(`droid_send_message interrupt:true to ${short(session)}: ${quote(steer)}`);
  demo.accepted(await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-steer-${demo.tag}`, session, prompt: steer, interrupt: true }));
  await waitFor(demo, mcp, [session]);
  const history = await mcp.ok<{ items: Array<{ type: string; run: string; kind?: string; detail?: string }> }>('droid_read_session', { session, limit: 100 });
  const notice = history.items.find((i) => i.run === s1.metadata.run && i.type === 'notice');
  demo.detail(`the counting run ${short(s1.metadata.run)} reads: ${notice ? `${notice.kind}: ${quote(notice.detail ?? '')}` : 'no notice'}`);
}

/** 4. Cancelling a turn in another session (read-only, another workspace); 5. usage. */
async function cancelAndCount(demo: DemoRun, mcp: McpDriver, session: string): Promise<void> {
  const count = demo.prompt('Write the numbers from 1 to 600, one per line.');
  demo.say(`droid_create_session in ${demo.scratch}, autonomy off (read-only): ${quote(count)}`);
  const b = await mcp.ok<Acceptance>('droid_create_session', {
    requestKey: `demo-cancel-${demo.tag}`,
    workspace: demo.scratch,
    prompt: count,
    replyTo: null,
    autonomy: 'off',
  });
  demo.accepted(b);
  await untilRunning(demo, mcp, b.metadata.session);
  await sleep(1_000);
  let t = Date.now();
  const cancelled = await mcp.ok<{ status: SessionView }>('droid_cancel_session', { session: b.metadata.session });
  demo.say(`droid_cancel_session ${short(b.metadata.session)} → run ${cancelled.status.latestRun.state} (${seconds(Date.now() - t)})`);
  await waitFor(demo, mcp, [b.metadata.session]);

  t = Date.now();
  const usage = await mcp.ok<{ turns: number; turnsWithUsage: number; inputTokens: number; outputTokens: number }>('droid_get_usage', {});
  demo.say(
    `droid_get_usage (all sessions) → ${usage.turns} turns, ${usage.turnsWithUsage} with usage: ${usage.inputTokens} input, ${usage.outputTokens} output tokens (${seconds(Date.now() - t)})`,
  );
  const mine = await mcp.ok<{ turns: number; inputTokens: number; outputTokens: number }>('droid_get_usage', { session });
  demo.detail(`session ${short(session)} alone: ${mine.turns} turns, ${mine.inputTokens} input, ${mine.outputTokens} output tokens`);
}

/** Stops everything this run started and reads the server log; returns why the run failed, if it did. */
async function finish(demo: DemoRun, mcp: McpDriver | undefined, model: ModelServer, keep: boolean): Promise<string | null> {
  let failed: string | null = null;
  const t = Date.now();
  await mcp?.closeWhenIdle().catch(() => undefined);
  const left = await waitUntilNoneTagged(TAG_VAR, demo.tag, 15_000);
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await model.close();
  await new Promise<void>((resolve) => demo.serverLog.end(resolve));
  if (left.length > 0) failed = `processes left running: ${left.join(', ')} (killed)`;
  else demo.say(`stopped the server; no process of this demo is left running (${seconds(Date.now() - t)})`);
  const log = readFileSync(join(demo.folder, 'server.log'), 'utf8').split('\n').filter(Boolean);
  const leaked = demo.prompts.filter((p) => log.some((line) => line.includes(p)));
  const warnings = log.filter((line) => /"level":(40|50|60)/.test(line)).length;
  demo.detail(`server log: ${log.length} lines on stderr, ${warnings} at warn or above, ${leaked.length} quoting a prompt`);
  const first = demo.firstSession;
  if (first) {
    const events = ['turn accepted', 'turn running: prompt submitted to droid', 'turn ended', 'waiting for sessions'];
    const named = events.filter((msg) => log.some((line) => line.includes(`"${first}"`) && line.includes(`"msg":"${msg}"`)));
    demo.detail(`info lines naming session ${short(first)}: ${named.join(', ')}`);
  }
  if (leaked.length > 0) failed ??= 'the server log quotes a prompt';
  if (keep) demo.detail(`kept ${demo.folder} (server.log, config.json, state/, droid-home/, approved/)`);
  else rmSync(demo.folder, { recursive: true, force: true });
  return failed;
}

async function demo(values: { keep: boolean; droid?: string | undefined }): Promise<number> {
  const droidPath = values.droid ?? pinnedDroidPath();
  if (!droidPath) {
    out(`No droid CLI for ${process.platform}-${process.arch} in node_modules (the pinned one is @factory/cli-linux-x64). Pass --droid /path/to/droid.`);
    return 1;
  }
  const run = new DemoRun();
  out('droid-mcp demo: the whole product offline; droid runs against a scripted model on 127.0.0.1');
  const model = await startModelServer({ unscripted: INSTRUCTIONS_HELP });
  let mcp: McpDriver | undefined;
  let failed: string | null = null;
  try {
    mcp = await startServer(run, droidPath, model);
    await tour(run, mcp);
    const session = await createNotes(run, mcp);
    await followUpAndSteer(run, mcp, session);
    await cancelAndCount(run, mcp, session);
  } catch (err) {
    failed = err instanceof Error ? err.message : String(err);
  } finally {
    // A failed step is the reason given; what the clean-up found counts only without one.
    const cleanup = await finish(run, mcp, model, values.keep);
    failed ??= cleanup;
  }
  if (failed) {
    out(`demo FAILED: ${failed}`);
    return 1;
  }
  out(`demo done in ${seconds(Date.now() - run.began)}`);
  return 0;
}

export const demoCommand = command({
  usage: ['[--keep] [--droid PATH]'],
  summary: ['the whole product offline in one command: the pinned', 'droid CLI against a scripted model, every MCP call', 'printed; --keep leaves its folder'],
  options: { keep: { type: 'boolean', default: false }, droid: { type: 'string' } },
  run: (values) => demo(values),
});
