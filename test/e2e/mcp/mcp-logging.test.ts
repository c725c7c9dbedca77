/**
 * MCP logging over stdio (issue 20): the server's own lines about a caller's
 * sessions reach the client as notifications/message, filtered by the level
 * the client set, and carry only the relayed fields: never the prompt, never
 * droid's session id. The built server, the real droid CLI, the scripted model.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { SERVER_ENTRY } from '../../../src/testbed/mcp-driver.js';
import { prose, script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { serverPerTest, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-logging-${process.pid}-${Date.now()}`;

serverPerTest(
  TAG,
  (made) => (ctx = made),
  () => ({
    ctx,
    take() {
      const s = server;
      server = undefined;
      return s;
    },
  }),
);

type Message = LoggingMessageNotification['params'];
const RELAYED_KEYS = ['message', 'session', 'sessions', 'run', 'state', 'code', 'action', 'waitingFor', 'settled', 'waitedMs', 'timeoutSeconds'];

/** Every droid session id the state directory holds. */
function droidSessionIds(dir: string): string[] {
  const ids = new Set<string>();
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name);
    if (!statSync(path).isFile()) continue;
    for (const m of readFileSync(path, 'utf8').matchAll(/"droidSessionId":"([^"]+)"/g)) ids.add(m[1]!);
  }
  return [...ids];
}

let keys = 0;
async function turn(s: RunningServer, name: string, secret: string): Promise<string> {
  const created = await s.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: `logging-${++keys}`,
    replyTo: null,
    workspace: ctx.workspace(name),
    autonomy: 'off',
    prompt: `${secret} ${script({ text: 'ok' })}`,
  });
  const session = created.metadata.session;
  for (;;) {
    const waited = await s.ok<{ timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    if (!waited.timedOut) return session;
  }
}

const about = (messages: Message[], session: string) => messages.filter((m) => (m.data as { session?: string }).session === session);
const texts = (messages: Message[]) => messages.map((m) => (m.data as { message: string }).message);

describe('MCP logging over stdio', () => {
  it("relays a session's info lines with only the relayed fields, and honours logging/setLevel", async () => {
    server = await ctx.start();
    const messages: Message[] = [];
    server.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void messages.push(n.params));
    expect(server.client.getServerCapabilities()?.logging).toEqual({});

    const first = await turn(server, 'logged', 'SECRET-PROMPT-MARKER-1');
    // The turn's ended line is logged after the result is durable, a moment before the wait returns, or just after.
    const end = Date.now() + 5_000;
    while (!texts(about(messages, first)).includes('turn ended') && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
    const mine = about(messages, first);
    expect(texts(mine)).toEqual(expect.arrayContaining(['turn accepted', 'turn running: prompt submitted to droid', 'turn ended']));
    expect(mine.find((m) => (m.data as { message: string }).message === 'turn ended')).toMatchObject({
      level: 'info',
      logger: 'droid-mcp',
      data: { state: 'succeeded' },
    });
    for (const m of messages) for (const k of Object.keys(m.data as object)) expect(RELAYED_KEYS).toContain(k);
    const ids = droidSessionIds(ctx.stateDir);
    expect(ids.length).toBeGreaterThan(0);
    const wire = JSON.stringify(messages);
    expect(wire).not.toContain('SECRET-PROMPT-MARKER-1');
    for (const id of ids) expect(wire).not.toContain(id);
    // stderr keeps the whole line (the start timeline is not relayed).
    expect(server.stderr()).toMatch(/"msg":"turn running: prompt submitted to droid"/);
    expect(wire).not.toContain('"start"');

    // At warning, no info line of the next turn reaches the client; stderr still has them.
    await server.client.setLoggingLevel('warning');
    const second = await turn(server, 'quiet', 'SECRET-PROMPT-MARKER-2');
    await new Promise((r) => setTimeout(r, 500));
    expect(server.stderr()).toContain(`"session":"${second}"`);
    expect(about(messages, second)).toEqual([]);
  });

  it('a client that dies mid-turn (both pipes gone) stops the server cleanly: exit 0, the turn recorded interrupted', async () => {
    const child = spawn(process.execPath, [SERVER_ENTRY, '--config', ctx.config()], { env: ctx.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    const until = async (done: () => boolean, what: string) => {
      const end = Date.now() + 30_000;
      while (!done()) {
        if (Date.now() > end) throw new Error(`${what} not seen; stderr:\n${err.slice(-3_000)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'dies', version: '1' } },
    });
    await until(() => out.includes('"id":1'), 'the initialize answer');
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const args = {
      requestKey: `logging-${++keys}`,
      replyTo: null,
      workspace: ctx.workspace('dies'),
      autonomy: 'off',
      prompt: `slow ${script({ text: prose(60), slowMs: 30_000 })}`,
    };
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'droid_create_session', arguments: args } });
    await until(() => err.includes('turn running: prompt submitted to droid'), 'the turn running');
    const running = err.split('\n').find((line) => line.includes('turn running: prompt submitted to droid'))!;
    const { session } = JSON.parse(running) as { session: string };
    // The client dies: nobody reads stdout any more, and stdin ends.
    child.stdout.destroy();
    child.stdin.end();
    expect(await exited, err.slice(-3_000)).toBe(0);
    expect(err).not.toContain('EPIPE');

    server = await ctx.start();
    const { status } = await server.ok<{ status: { latestRun: { state: string } } }>('droid_get_session_status', { session });
    expect(status.latestRun.state).toBe('interrupted');
  });
});
