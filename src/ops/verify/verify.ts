/**
 * What the verification commands (smoke, verify-live, acceptance) share: a
 * disposable private instance of the built server (its own state directory,
 * config and, for HTTP, token and port) that they alone created and alone
 * remove; sanitized reporting (assertions and versions only: no prompts, no
 * droid session ids, no tokens); and a hard deadline.
 *
 * They run against whatever droid login the calling user has: an operator's
 * real one, or in CI the pinned CLI with the scripted model (src/testbed/).
 */
import { AUTONOMY_LEVELS } from '../../droid/permission-policy.js';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SERVER_VERSION } from '../../mcp/server.js';
import { McpDriver } from '../../testbed/mcp-driver.js';
import { waitUntilNoneTagged } from '../../testbed/processes.js';
import { freePort, readyPort, spawnServer, stopServer } from '../../testbed/server-process.js';
import { CommandRefusal, type OptionValues } from '../command.js';
import { out } from '../output.js';
import { stringEnv } from '../../util/string-env.js';

const TAG_VAR = 'DROID_MCP_VERIFY_TAG';
/** Written into every folder a script creates; nothing without it is ever removed. */
const MARKER = '.created-by-droid-mcp-verification';

export class Report {
  passed = 0;
  failed = 0;

  constructor(readonly title: string) {}

  check(ok: boolean, what: string, why = ''): boolean {
    if (ok) this.passed++;
    else this.failed++;
    out(`${ok ? 'ok  ' : 'FAIL'}  ${what}${!ok && why ? ` (${why})` : ''}`);
    return ok;
  }

  note(text: string): void {
    out(`      ${text}`);
  }

  summary(): number {
    out(`${this.title}: ${this.passed} passed, ${this.failed} failed`);
    return this.failed === 0 ? 0 : 1;
  }
}

export interface VerifyOptions {
  droid: string;
  model: string;
  workspace: string;
  reasoning?: string;
  autonomy: 'off' | 'low' | 'medium' | 'high';
  sandbox: boolean;
  /** Where the disposable folder goes; it must not exist yet. */
  state?: string;
  timeoutSeconds: number;
}

export const SHARED_ARGS = {
  droid: { type: 'string' },
  model: { type: 'string' },
  workspace: { type: 'string' },
  reasoning: { type: 'string' },
  autonomy: { type: 'string' },
  'no-sandbox': { type: 'boolean' },
  state: { type: 'string' },
  timeout: { type: 'string' },
} as const;

/** Checks the options every verification command shares; refuses them with what is wrong. */
export function verifyOptions(values: OptionValues<typeof SHARED_ARGS>, defaultTimeoutSeconds = 300): VerifyOptions {
  const need = (key: 'droid' | 'workspace'): string => {
    const v = values[key];
    if (typeof v !== 'string' || !v.startsWith('/')) throw new CommandRefusal(`--${key} must be an absolute path`);
    return v;
  };
  const model = values.model;
  if (typeof model !== 'string' || model === '') throw new CommandRefusal('--model ID is required (an id from the live catalog)');
  const autonomy = values.autonomy ?? 'low';
  if (!(AUTONOMY_LEVELS as readonly string[]).includes(autonomy)) throw new CommandRefusal('--autonomy must be off, low, medium or high');
  const timeoutSeconds = Number(values.timeout ?? defaultTimeoutSeconds);
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 10) throw new CommandRefusal('--timeout must be a whole number of seconds, at least 10');
  const workspace = need('workspace');
  if (!existsSync(workspace) || !statSync(workspace).isDirectory()) throw new CommandRefusal(`--workspace ${workspace} is not an existing directory`);
  return {
    droid: need('droid'),
    model,
    workspace: realpathSync(workspace),
    ...(typeof values.reasoning === 'string' && { reasoning: values.reasoning }),
    autonomy: autonomy as VerifyOptions['autonomy'],
    sandbox: values['no-sandbox'] !== true,
    ...(typeof values.state === 'string' && { state: values.state }),
    timeoutSeconds,
  };
}

/** droid's version line, or a note that it did not answer. */
function droidVersion(droid: string): string {
  try {
    return execFileSync(droid, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim().split('\n')[0] ?? 'unknown';
  } catch {
    return 'unknown (droid --version failed)';
  }
}

function versionsLine(droid: string): string {
  return `droid-mcp ${SERVER_VERSION}, droid ${droidVersion(droid)}, node ${process.version}`;
}

interface Instance {
  mcp: McpDriver;
  /** The state directory this run created. */
  stateDir: string;
  /** Stops the server, waits for every process of this run, removes what it created. Idempotent. */
  dispose(): Promise<{ leftRunning: number; removed: boolean }>;
}

/**
 * Creates the disposable folder (refusing one that exists), writes the config
 * and starts the built server. HTTP gets its own free port and a new token.
 */
async function startInstance(options: VerifyOptions, transport: 'stdio' | 'http', tag: string): Promise<Instance & { url?: string; token?: string }> {
  let base: string;
  if (options.state) {
    // Never anyone else's directory: only one this run creates.
    if (existsSync(options.state)) throw new Error(`--state ${options.state} exists; this script only uses a state directory it creates itself`);
    mkdirSync(options.state, { mode: 0o700 });
    base = realpathSync(options.state);
  } else {
    base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-verify-')));
  }
  const nonce = randomUUID();
  writeFileSync(join(base, MARKER), `${nonce}\n`, { mode: 0o600 });
  const stateDir = join(base, 'state');
  const config: Record<string, unknown> = {
    approvedDirectories: [options.workspace],
    stateDirectory: stateDir,
    droidPath: options.droid,
    defaultModel: options.model,
    ...(options.reasoning && { reasoningEffort: options.reasoning }),
    ...(!options.sandbox && { sandbox: 'off' }),
  };
  let token: string | undefined;
  if (transport === 'http') {
    token = randomBytes(32).toString('base64url');
    writeFileSync(join(base, 'token'), `${token}\n`, { mode: 0o600 });
    Object.assign(config, { transport: 'http', port: await freePort(), tokenFile: join(base, 'token') });
  }
  const configPath = join(base, 'config.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2), { mode: 0o600 });
  const env = stringEnv({ ...process.env, [TAG_VAR]: tag });
  const log: string[] = [];
  const keep = (chunk: string) => {
    log.push(chunk);
    if (log.length > 2_000) log.splice(0, 1_000);
  };

  let child: ChildProcess | undefined;
  let mcp: McpDriver;
  let url: string | undefined;
  try {
    if (transport === 'stdio') mcp = await McpDriver.stdio(configPath, env, keep);
    else {
      child = spawnServer(configPath, env, keep);
      const port = await readyPort(child);
      url = `http://127.0.0.1:${port}/mcp`;
      mcp = await McpDriver.http(url, token!);
    }
  } catch (err) {
    child?.kill('SIGKILL');
    removeIfOurs(base, nonce);
    throw new Error(`the server did not start: ${err instanceof Error ? err.message : String(err)}\n${log.join('').slice(-2_000)}`);
  }

  let disposed: Promise<{ leftRunning: number; removed: boolean }> | undefined;
  const dispose = () =>
    (disposed ??= (async () => {
      await mcp.closeWhenIdle().catch(() => undefined);
      // Not killed here: one that ignores SIGTERM is counted with whatever else of this run is left.
      if (child) await stopServer(child, 20_000);
      const left = await waitUntilNoneTagged(TAG_VAR, tag, 15_000);
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      removeIfOurs(base, nonce);
      return { leftRunning: left.length, removed: !existsSync(base) };
    })());
  return { mcp, stateDir, dispose, ...(url && { url }), ...(token && { token }) };
}

/** Removes `base` only when it still holds the marker this run wrote into it. */
function removeIfOurs(base: string, nonce: string): void {
  try {
    if (readFileSync(join(base, MARKER), 'utf8').trim() !== nonce) return;
  } catch {
    return;
  }
  rmSync(base, { recursive: true, force: true });
}

/** Droid session ids recorded anywhere in the state directory (journal and snapshot): never printed, only counted. */
export function droidSessionIdsIn(stateDir: string): Set<string> {
  const ids = new Set<string>();
  for (const name of ['journal.jsonl', 'state.jsonl']) {
    let text = '';
    try {
      text = readFileSync(join(stateDir, name), 'utf8');
    } catch {
      continue;
    }
    for (const match of text.matchAll(/"droidSessionId":"([^"]+)"/g)) ids.add(match[1]!);
  }
  return ids;
}

/** Rejects after `seconds`: every script is bounded. */
function deadline(seconds: number): { expired: Promise<never>; clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within its ${seconds} s bound (--timeout)`)), seconds * 1000);
  });
  expired.catch(() => undefined);
  return { expired, clear: () => clearTimeout(timer) };
}

/** What a script's report says about the instance it started, once it is disposed of. */
interface DisposalChecks {
  stopped: string;
  removed: string;
}

/**
 * Starts a disposable instance and runs `body` against it within the
 * script's time bound; whatever happens, the instance is disposed of and
 * the report says whether it left a process or its state behind.
 */
export async function onDisposableInstance(
  report: Report,
  options: VerifyOptions,
  transport: 'stdio' | 'http',
  checks: DisposalChecks,
  body: (instance: Instance & { url?: string; token?: string }) => Promise<void>,
): Promise<number> {
  report.note(versionsLine(options.droid));
  const bound = deadline(options.timeoutSeconds);
  let instance: (Instance & { url?: string; token?: string }) | undefined;
  const run = async () => {
    instance = await startInstance(options, transport, randomUUID());
    await body(instance);
  };
  try {
    await Promise.race([bound.expired, run()]);
  } catch (err) {
    report.check(false, 'the run completed', err instanceof Error ? err.message.split('\n')[0]! : String(err));
  } finally {
    bound.clear();
    if (instance) {
      const { leftRunning, removed } = await instance.dispose();
      report.check(leftRunning === 0, checks.stopped, `${leftRunning} killed`);
      report.check(removed, checks.removed);
    }
  }
  return report.summary();
}

interface Settled {
  state: string;
  agentState: string;
  preview: string;
  errorCode: string | null;
}

/** Waits (repeated bounded calls) until the session settles; returns its latest run. */
export async function settle(mcp: McpDriver, session: string): Promise<Settled> {
  for (;;) {
    const waited = await mcp.ok<{
      sessions: Array<{ agentState: string; preview: string; latestRun: { state: string; error: { code: string } | null } }>;
      timedOut: boolean;
    }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    if (waited.timedOut) continue;
    const s = waited.sessions[0]!;
    return { state: s.latestRun.state, agentState: s.agentState, preview: s.preview, errorCode: s.latestRun.error?.code ?? null };
  }
}

/** Polls until the session's latest run is `running` (its prompt reached droid). */
export async function untilRunning(mcp: McpDriver, session: string): Promise<string> {
  for (;;) {
    const { status } = await mcp.ok<{ status: { agentState: string; latestRun: { state: string } } }>('droid_get_session_status', { session });
    if (status.latestRun.state === 'running' || status.agentState !== 'working') return status.latestRun.state;
    await sleep(100);
  }
}

/** A fresh exact-reply instruction; the reply is checked, never printed. */
export function exactPrompt(label: string): { prompt: string; expected: string } {
  const expected = `${label}-${randomBytes(4).toString('hex').toUpperCase()}`;
  return { prompt: `Reply with exactly: ${expected}`, expected };
}

/** A reply equal to `expected` once surrounding whitespace is trimmed. */
export function exact(reply: string, expected: string): boolean {
  return reply.trim() === expected;
}

export const SLOW_PROMPT = 'Write the numbers from 1 to 500, one per line.';
