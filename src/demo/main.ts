#!/usr/bin/env node
/**
 * `npm run demo`: the whole product, offline, in one command. The pinned
 * droid CLI from node_modules runs against the scripted model (model.ts) on
 * 127.0.0.1, with a private droid home, state directory and approved root in
 * one temporary folder. The built server runs as its own process and is
 * driven over stdio through the MCP SDK client, the way an agent uses it;
 * every call is printed with what came back and how long it took. At the end
 * nothing is left running and the folder is removed (`--keep` leaves it).
 *
 * Options: --keep, --droid PATH (another droid CLI).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, chmodSync, constants, createWriteStream, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { probeSandbox } from '../sandbox/probe.js';
import { McpDriver, seconds, waitUntilNoneTagged } from '../ops/harness.js';
import { out } from '../ops/output.js';
import { customModelId, isolatedEnv, pinnedDroidPath, writeDroidSettings } from './droid-home.js';
import { startScriptedModel } from './model-server.js';

const TAG_VAR = 'DROID_MCP_DEMO_TAG';

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

const began = Date.now();
const stamp = () => `[${seconds(Date.now() - began).padStart(7)}]`;
const say = (text: string) => out(`${stamp()} ${text}`);
const detail = (text: string) => out(`${' '.repeat(stamp().length)}   ${text}`);
const short = (id: string) => id.slice(0, 8);
const quote = (text: string, max = 70) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return JSON.stringify(flat.length > max ? `${flat.slice(0, max)}…` : flat);
};

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
async function waitFor(mcp: McpDriver, sessions: string[], timeoutSeconds = 60, once = false): Promise<SessionView[]> {
  const t = Date.now();
  say(`droid_wait_for_sessions ${sessions.map(short).join(', ')}, timeoutSeconds ${timeoutSeconds} (with a progress token)`);
  let last = '';
  for (;;) {
    const waited = await mcp.ok<{ sessions: SessionView[]; timedOut: boolean }>(
      'droid_wait_for_sessions',
      { sessions, timeoutSeconds },
      {
        onprogress: (p) => {
          if (p.message === last) return;
          last = p.message ?? '';
          detail(`progress ${p.progress.toFixed(1)}/${p.total ?? '?'} s: ${p.message ?? ''}`);
        },
      },
    );
    if (once && waited.timedOut) {
      detail(`→ timedOut (not a failure: ${waited.sessions.map((v) => `${short(v.session)} still ${v.latestRun.state}`).join(', ')}) (${seconds(Date.now() - t)})`);
      return waited.sessions;
    }
    if (!waited.timedOut) {
      for (const s of waited.sessions) {
        const run = s.latestRun;
        detail(`→ ${short(s.session)} ${s.agentState}, run ${short(run.run)} ${run.state}${run.error ? ` (${run.error.code})` : ''}: ${quote(s.preview)} (${seconds(Date.now() - t)})`);
      }
      return waited.sessions;
    }
  }
}

/** Polls droid_get_session_status until the session's latest run reads `running`. */
async function untilRunning(mcp: McpDriver, session: string): Promise<void> {
  const t = Date.now();
  for (let polls = 1; ; polls++) {
    const { status } = await mcp.ok<{ status: SessionView }>('droid_get_session_status', { session });
    if (status.latestRun.state === 'running') {
      say(`droid_get_session_status ${short(session)} → running after ${polls} polls (${seconds(Date.now() - t)})`);
      return;
    }
    if (status.agentState !== 'working') throw new Error(`the turn ended before it ran: ${status.latestRun.state}`);
    await sleep(100);
  }
}

function accepted(a: Acceptance): void {
  detail(`→ session ${short(a.metadata.session)}, run ${short(a.metadata.run)}: ${a.admission.action} (${a.admission.detail}); latestRun.state ${a.status.latestRun.state}`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { keep: { type: 'boolean', default: false }, droid: { type: 'string' } }, strict: true });
  const droidPath = values.droid ?? pinnedDroidPath();
  if (!droidPath) {
    out(`No droid CLI for ${process.platform}-${process.arch} in node_modules (the pinned one is @factory/cli-linux-x64). Pass --droid /path/to/droid.`);
    return 1;
  }
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-demo-')));
  chmodSync(folder, 0o700);
  const home = join(folder, 'droid-home');
  const approved = join(folder, 'approved');
  const project = join(approved, 'project');
  const scratch = join(approved, 'scratch');
  for (const dir of [home, project, scratch]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stateDirectory = join(folder, 'state');
  const tag = randomUUID();
  const prompts: string[] = [];
  const prompt = (text: string) => (prompts.push(text), text);

  out('droid-mcp demo: the whole product offline; droid runs against a scripted model on 127.0.0.1');
  const model = await startScriptedModel();
  const serverLog = createWriteStream(join(folder, 'server.log'), { mode: 0o600 });
  let mcp: McpDriver | undefined;
  let failed: string | null = null;
  let firstSession: string | null = null;
  try {
    await writeDroidSettings(home, model.baseUrl);
    const env = isolatedEnv(home, { [TAG_VAR]: tag, DROID_MCP_LOG_LEVEL: 'info' });
    const modelId = await customModelId(droidPath, env);
    say(`folder ${folder} (droid home, state, approved root)`);
    detail(`droid ${droidPath} (version ${execFileSync(droidPath, ['--version'], { encoding: 'utf8', env, timeout: 10_000 }).trim()})`);
    detail(`scripted model ${model.baseUrl}, droid calls it ${modelId}`);

    const bwrap = process.platform === 'linux' ? findOnPath('bwrap') : null;
    const probe = bwrap ? await probeSandbox(bwrap) : { ok: false, detail: process.platform === 'linux' ? 'bwrap is not installed' : `no sandbox on ${process.platform}` };
    const config: Record<string, unknown> = { approvedDirectories: [approved], stateDirectory, droidPath, defaultModel: modelId };
    if (!probe.ok) config.sandbox = 'off';
    detail(probe.ok ? `sandbox bwrap (${bwrap}): each turn writes only its workspace` : `sandbox off: ${probe.detail}`);
    const configPath = join(folder, 'config.json');
    writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });

    let t = Date.now();
    mcp = await McpDriver.stdio(configPath, env, (chunk) => serverLog.write(chunk));
    say(`started the server: node dist/src/cli.js --config ${configPath} (pid ${mcp.pid}), MCP over stdio (${seconds(Date.now() - t)})`);
    const tools = await mcp.listTools();
    detail(`tools/list → ${tools.length} tools: ${tools.join(', ')}`);

    t = Date.now();
    const ws = await mcp.ok<{ workspaces: string[]; capacity: { maximum: number; active: number }; policy: { defaultModel: string; maxAutonomy: string; sandbox: { mode: string; available: boolean } } }>('droid_list_workspaces');
    say(`droid_list_workspaces → roots ${ws.workspaces.join(', ')}; capacity ${ws.capacity.active}/${ws.capacity.maximum}; default model ${ws.policy.defaultModel}; max autonomy ${ws.policy.maxAutonomy}; sandbox ${ws.policy.sandbox.mode} (available: ${ws.policy.sandbox.available}) (${seconds(Date.now() - t)})`);
    t = Date.now();
    const models = await mcp.ok<{ models: Array<{ id: string; displayName: string | null }> }>('droid_models');
    const custom = models.models.filter((m) => m.id.startsWith('custom:'));
    say(`droid_models → ${models.models.length} models in droid's live catalog (${seconds(Date.now() - t)})`);
    detail(`built in: ${models.models.filter((m) => !m.id.startsWith('custom:')).slice(0, 4).map((m) => m.id).join(', ')}, … (need a Factory login)`);
    detail(`custom (BYOK): ${custom.map((m) => `${m.id} "${m.displayName}"`).join(', ')}`);

    // 1. A session whose turn writes a file.
    const notes = join(project, 'notes.txt');
    t = Date.now();
    const create = prompt(`Create the file ${notes} containing: Hello from droid, offline.`);
    say(`droid_create_session in ${project}, title "Demo notes", autonomy high: ${quote(create)}`);
    const a = await mcp.ok<Acceptance>('droid_create_session', { requestKey: `demo-create-${tag}`, workspace: project, prompt: create, replyTo: null, title: 'Demo notes', autonomy: 'high' });
    accepted(a);
    const session = a.metadata.session;
    firstSession = session;
    await waitFor(mcp, [session]);
    detail(`${notes} now holds ${quote(readFileSync(notes, 'utf8'))}`);

    t = Date.now();
    const history = await mcp.ok<{ items: Array<{ type: string; tool?: string; status?: string; text?: string; kind?: string }>; nextCursor: string | null }>('droid_read_session', { session });
    say(`droid_read_session → ${history.items.length} items (${seconds(Date.now() - t)}):`);
    for (const item of history.items) {
      detail(item.type === 'tool_call' ? `tool_call ${item.tool} (${item.status})` : item.type === 'assistant_text' ? `assistant_text ${quote(item.text ?? '')}` : `${item.type} ${item.kind ?? ''}`);
    }

    // 2. A follow-up in the same droid session.
    const follow = prompt('Reply with exactly: The notes file is ready.');
    say(`droid_send_message to ${short(session)}: ${quote(follow)}`);
    const f = await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-follow-${tag}`, session, prompt: follow });
    accepted(f);
    await waitFor(mcp, [session]);

    // 3. Steering a slow turn.
    const slow = prompt('Write the numbers from 1 to 400, one per line.');
    say(`droid_send_message to ${short(session)}: ${quote(slow)} (streams for ~16 s)`);
    const s1 = await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-slow-${tag}`, session, prompt: slow });
    accepted(s1);
    await untilRunning(mcp, session);
    await waitFor(mcp, [session], 4, true);
    const steer = prompt('Reply with exactly: Steered: stopped counting.');
    say(`droid_send_message interrupt:true to ${short(session)}: ${quote(steer)}`);
    const s2 = await mcp.ok<Acceptance>('droid_send_message', { requestKey: `demo-steer-${tag}`, session, prompt: steer, interrupt: true });
    accepted(s2);
    await waitFor(mcp, [session]);
    const history2 = await mcp.ok<{ items: Array<{ type: string; run: string; kind?: string; detail?: string }> }>('droid_read_session', { session, limit: 100 });
    const notice = history2.items.find((i) => i.run === s1.metadata.run && i.type === 'notice');
    detail(`the counting run ${short(s1.metadata.run)} reads: ${notice ? `${notice.kind}: ${quote(notice.detail ?? '')}` : 'no notice'}`);

    // 4. Cancelling a turn in another session (read-only, another workspace).
    const count = prompt('Write the numbers from 1 to 600, one per line.');
    say(`droid_create_session in ${scratch}, autonomy off (read-only): ${quote(count)}`);
    const b = await mcp.ok<Acceptance>('droid_create_session', { requestKey: `demo-cancel-${tag}`, workspace: scratch, prompt: count, replyTo: null, autonomy: 'off' });
    accepted(b);
    await untilRunning(mcp, b.metadata.session);
    await sleep(1_000);
    t = Date.now();
    const cancelled = await mcp.ok<{ status: SessionView }>('droid_cancel_session', { session: b.metadata.session });
    say(`droid_cancel_session ${short(b.metadata.session)} → run ${cancelled.status.latestRun.state} (${seconds(Date.now() - t)})`);
    await waitFor(mcp, [b.metadata.session]);

    // 5. Usage.
    t = Date.now();
    const usage = await mcp.ok<{ turns: number; turnsWithUsage: number; inputTokens: number; outputTokens: number }>('droid_get_usage', {});
    say(`droid_get_usage (all sessions) → ${usage.turns} turns, ${usage.turnsWithUsage} with usage: ${usage.inputTokens} input, ${usage.outputTokens} output tokens (${seconds(Date.now() - t)})`);
    const mine = await mcp.ok<{ turns: number; inputTokens: number; outputTokens: number }>('droid_get_usage', { session });
    detail(`session ${short(session)} alone: ${mine.turns} turns, ${mine.inputTokens} input, ${mine.outputTokens} output tokens`);
  } catch (err) {
    failed = err instanceof Error ? err.message : String(err);
  } finally {
    const t = Date.now();
    await mcp?.close().catch(() => undefined);
    const left = await waitUntilNoneTagged(TAG_VAR, tag, 15_000);
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await model.close();
    await new Promise<void>((resolve) => serverLog.end(resolve));
    if (left.length > 0) failed ??= `processes left running: ${left.join(', ')} (killed)`;
    else say(`stopped the server; no process of this demo is left running (${seconds(Date.now() - t)})`);
    const log = readFileSync(join(folder, 'server.log'), 'utf8').split('\n').filter(Boolean);
    const leaked = prompts.filter((p) => log.some((line) => line.includes(p)));
    const warnings = log.filter((line) => /"level":(40|50|60)/.test(line)).length;
    detail(`server log: ${log.length} lines on stderr, ${warnings} at warn or above, ${leaked.length} quoting a prompt`);
    if (firstSession) {
      const events = ['turn accepted', 'turn running: prompt submitted to droid', 'turn ended', 'waiting for sessions'];
      const named = events.filter((msg) => log.some((line) => line.includes(`"${firstSession}"`) && line.includes(`"msg":"${msg}"`)));
      detail(`info lines naming session ${short(firstSession)}: ${named.join(', ')}`);
    }
    if (leaked.length > 0) failed ??= 'the server log quotes a prompt';
    if (values.keep) detail(`kept ${folder} (server.log, config.json, state/, droid-home/, approved/)`);
    else rmSync(folder, { recursive: true, force: true });
  }
  if (failed) {
    out(`demo FAILED: ${failed}`);
    return 1;
  }
  out(`demo done in ${seconds(Date.now() - began)}`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
