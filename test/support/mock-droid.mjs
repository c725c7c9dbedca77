#!/usr/bin/env node
// Protocol-peer stand-in for `droid exec --input-format stream-jsonrpc
// --output-format stream-jsonrpc` (CLI 0.225.2, protocol 1.220.0), for the
// faults the real CLI will not produce on demand. Framing and error codes
// follow what the real CLI was measured to do (see docs/PROTOCOL-NOTES.md).
//
// Scenario: a marker `<<mock:NAME>>` in the prompt of add_user_message.
//   crash | malformed | wrong-turn | silence | permission | permission-no-once
//   | ask | unknown-request | slow | auth-error-0215   (none → a normal turn)
//   | deaf    like silence, but interrupt_session is never even answered
//   | linger  a normal turn, then the process never goes: close_session is
//             never answered, and stdin EOF and SIGTERM are ignored
//   | auth-error-0215  a missing Factory login as droid 0.215.0 reports it
//             (AuthenticationError notification, then reason `error`)
//   | credits  20 model steps 100 ms apart, each reported like a Factory model's
//             (10 input tokens, 0.5 credits) in session_token_usage_changed
// Env:
//   MOCK_DROID_STATE_DIR      sessions persist here as <sessionId>.json; the value
//                             `droid` keeps them where droid does, as
//                             <home>/.factory/sessions/<cwd, "/" → "-">/<sessionId>.jsonl
//                             (the sandbox gives a turn only that session's files there)
//   MOCK_DROID_INIT_DELAY_MS  delay before answering initialize_session
//   MOCK_DROID_LOG            append every received frame here, one JSON a line
//                             (a relative path is the process's cwd: a turn's workspace)
//   MOCK_DROID_EXIT_DELAY_MS  after EOF, exit (logging {exit: 'voluntary'}) only after this delay
//   MOCK_DROID_RENAME_DELAY_MS answer rename_session {success: true} after this
//   MOCK_DROID_LOAD_NO_USAGE  load_session answers without the session's usage totals (as a droid that does not send them)
//   MOCK_DROID_REWIND_HANG    execute_rewind is never answered (a droid stuck mid-restore); unset, it is refused
//                             delay (unset: rename_session is an unknown method)
import { randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

if (process.argv.includes('--version')) {
  process.stdout.write('0.225.2-mock\n');
  process.exit(0);
}
if (process.argv[2] !== 'exec') {
  process.stderr.write('mock-droid: only `exec --input-format stream-jsonrpc --output-format stream-jsonrpc` and `--version`\n');
  process.exit(2);
}

const HOST_ID = randomUUID();
const STATE_DIR = process.env.MOCK_DROID_STATE_DIR || '';
const LOG = process.env.MOCK_DROID_LOG || '';
const INIT_DELAY = Number(process.env.MOCK_DROID_INIT_DELAY_MS || 0);
const zeroUsage = () => ({ inputTokens: 0, outputTokens: 0, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: 0 });
const TURN_USAGE = { inputTokens: 10, outputTokens: 5, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: 0 };

const MODELS = [
  {
    id: 'mock-model',
    modelId: 'mock-model',
    modelProvider: 'anthropic',
    displayName: 'Mock Model',
    shortDisplayName: 'Mock Model',
    supportedReasoningEfforts: ['off', 'low', 'medium', 'high'],
    defaultReasoningEffort: 'high',
    deprecated: false,
    isCustom: false,
  },
  {
    id: 'custom:Mock-Custom-0',
    displayName: 'Mock Custom',
    shortDisplayName: 'Mock Custom',
    modelProvider: 'generic-chat-completion-api',
    supportedReasoningEfforts: ['none'],
    defaultReasoningEffort: 'none',
    isCustom: true,
    noImageSupport: true,
  },
];

// ---- output -------------------------------------------------------------

function send(frame) {
  const head = { jsonrpc: '2.0', type: frame.type, factoryApiVersion: '1.0.0', factoryProtocolVersion: '1.220.0' };
  process.stdout.write(`${JSON.stringify({ ...head, ...frame })}\n`);
}
const respond = (id, result) => send({ type: 'response', id, result });
const fail = (id, code, message) => send({ type: 'response', id, error: { code, message } });

/** Session notifications; tool_call and settings_updated carry no sessionId on the real CLI. */
function notify(notification, withSession = true) {
  const params = withSession && session ? { sessionId: session.sessionId, notification } : { notification };
  send({ type: 'notification', method: 'droid.session_notification', params });
}

function log(entry) {
  if (LOG) appendFileSync(LOG, `${JSON.stringify(entry)}\n`); // sync: survives the crash scenario
}

// ---- session state ------------------------------------------------------

let session = null; // { sessionId, cwd, settings, messages, cumulative }
let turn = null; // { messageId, abort: AbortController, ignoresInterrupt }
let turnChain = Promise.resolve();
let lingering = false; // set by the linger scenario: this process never leaves on its own

function linger() {
  lingering = true;
  process.on('SIGTERM', () => {}); // only SIGKILL ends it
  setInterval(() => {}, 60_000);
}
const pending = new Map(); // server request id → resolve(frame)

const DROID_LAYOUT = STATE_DIR === 'droid';
const SESSIONS = path.join(process.env.FACTORY_HOME_OVERRIDE || process.env.HOME || '/nonexistent', '.factory', 'sessions');

/** Where a session's file is (or would be): droid's layout needs the cwd, found by search on load. */
function sessionFile(id, cwd) {
  const name = path.basename(id);
  if (!DROID_LAYOUT) return path.join(STATE_DIR, `${name}.json`);
  if (cwd !== undefined) return path.join(SESSIONS, cwd.replaceAll('/', '-'), `${name}.jsonl`);
  let folders = [];
  try {
    folders = readdirSync(SESSIONS);
  } catch {
    // no sessions yet
  }
  const found = folders.map((f) => path.join(SESSIONS, f, `${name}.jsonl`)).find((f) => existsSync(f));
  return found ?? path.join(SESSIONS, `${name}.jsonl`);
}
function persist() {
  if (!STATE_DIR || !session) return;
  const file = sessionFile(session.sessionId, session.cwd);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(session));
}
function fullSettings() {
  return { ...session.settings, availableAutonomyLevels: ['off', 'low', 'medium', 'high'], enabledToolIds: [], disabledToolIds: [] };
}

// ---- helpers for turns --------------------------------------------------

class Cancelled extends Error {}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Cancelled());
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new Cancelled());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Sends a droid → client request and waits for the matching response frame. */
function ask(method, params, signal, timeoutMs = 0) {
  const id = randomUUID();
  return new Promise((resolve, reject) => {
    let timer;
    const onAbort = () => {
      pending.delete(id);
      clearTimeout(timer);
      reject(new Cancelled());
    };
    pending.set(id, (frame) => {
      pending.delete(id);
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(frame);
    });
    if (timeoutMs > 0) timer = setTimeout(() => pending.get(id)?.({ timedOut: true }), timeoutMs);
    signal.addEventListener('abort', onAbort, { once: true });
    send({ type: 'request', id, method, params });
  });
}

const now = () => Date.now();
const state = (newState) => notify({ type: 'droid_working_state_changed', newState });

function addMessage(message, extra = {}) {
  const full = { createdAt: now(), updatedAt: now(), ...message };
  session.messages.push(full);
  notify({ type: 'create_message', message: full, ...extra });
  return full;
}

function toolUse(name, input) {
  return { type: 'tool_use', id: `call_${randomUUID().slice(0, 8)}`, name, input };
}

/** Announces a tool use the way the real CLI does, up to execution. */
function startTool(use, parentId) {
  notify({ type: 'tool_call', toolUse: { ...use, input: {} } }, false);
  notify({ type: 'tool_call', toolUse: use }, false);
  addMessage({ id: randomUUID(), role: 'assistant', content: [use], parentId });
  state('executing_tool');
  notify({ type: 'tool_execution_phase_changed', toolUseId: use.id, toolName: use.name, phase: 'queued' });
}

function toolResult(use, content, isError) {
  notify({ type: 'tool_result', toolUseId: use.id, messageId: randomUUID(), content, isError });
}

function finishText(prompt, parentId) {
  const id = randomUUID();
  const text = `mock: ${prompt}`;
  state('streaming_assistant_message');
  notify({ type: 'assistant_text_delta', messageId: id, blockIndex: 0, textDelta: text });
  notify({ type: 'assistant_text_complete', messageId: id, blockIndex: 0 });
  addMessage({ id, role: 'assistant', content: [{ type: 'text', text }], modelId: session.settings.modelId, parentId });
}

function complete(turnId, reason, usage, started) {
  const add = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k] + b[k]]));
  session.cumulative = add(session.cumulative, usage);
  notify({
    type: 'session_token_usage_changed',
    sessionId: session.sessionId,
    tokenUsage: session.cumulative,
    inclusiveTokenUsage: session.cumulative,
    lastCallTokenUsage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cacheReadTokens: 0 },
  });
  notify({
    type: 'agent_turn_completed',
    reason,
    turnId,
    tokenUsage: usage,
    cumulativeTokenUsage: session.cumulative,
    childTokenUsage: zeroUsage(),
    cumulativeChildTokenUsage: zeroUsage(),
    durationMs: now() - started,
  });
  state('idle');
  persist();
}

// ---- scenarios ----------------------------------------------------------

const PERMISSION_OPTIONS = {
  proceed_once: { label: 'Yes, allow', value: 'proceed_once' },
  proceed_always: { label: 'Yes, and always allow high impact commands (all commands)', value: 'proceed_always' },
  cancel: { label: 'No, cancel', value: 'cancel' },
};

async function permissionTurn(messageId, signal, optionNames) {
  const use = toolUse('Execute', { command: 'echo done', riskLevel: 'high', riskLevelReason: 'mock' });
  startTool(use, messageId);
  state('waiting_for_tool_confirmation');
  const details = { type: 'exec', fullCommand: 'echo done', command: 'echo', extractedCommands: ['echo'], impactLevel: 'high', riskLevelReason: 'mock' };
  const params = { toolUses: [{ toolUse: use, confirmationType: 'exec', details }], options: optionNames.map((n) => PERMISSION_OPTIONS[n]) };
  const reply = await ask('droid.request_permission', params, signal);
  const selected = reply.result?.selectedOption;
  state('executing_tool');
  notify({ type: 'permission_resolved', requestId: reply.id, toolUseIds: [use.id], selectedOption: selected ?? 'cancel' });
  if (selected === 'proceed_once') toolResult(use, 'done\n\n\n[Process exited with code 0]', false);
  else toolResult(use, 'Tool execution cancelled by user', true);
}

async function askTurn(messageId, signal) {
  const use = toolUse('AskUser', { questionnaire: '1. [question] Deploy now?\n[topic] Deploy\n[option] yes\n[option] no' });
  startTool(use, messageId);
  notify({ type: 'tool_execution_phase_changed', toolUseId: use.id, toolName: use.name, phase: 'executing' });
  state('waiting_for_tool_confirmation');
  const reply = await ask(
    'droid.ask_user',
    { toolCallId: use.id, questions: [{ index: 1, topic: 'Deploy', question: 'Deploy now?', options: ['yes', 'no'] }] },
    signal,
  );
  state('executing_tool');
  if (!reply.result || reply.result.cancelled) toolResult(use, 'Error: AskUser cancelled', true);
  else toolResult(use, JSON.stringify(reply.result), false);
}

/** Runs one turn; returns normally when it completed or was cancelled. */
async function runTurn(prompt, messageId, requestId) {
  if (!session) return; // closed while this turn was queued
  const scenario = /<<mock:([a-z0-9-]+)>>/.exec(prompt)?.[1] ?? '';
  const abort = new AbortController();
  const signal = abort.signal;
  const started = now();
  turn = { messageId, abort, ignoresInterrupt: scenario === 'silence' || scenario === 'deaf', deaf: scenario === 'deaf' };
  if (scenario === 'linger') linger();
  try {
    state('streaming_assistant_message');
    addMessage(
      { id: messageId, role: 'user', content: [{ type: 'text', text: prompt }], interactionMode: session.settings.interactionMode, parentId: 'root' },
      { requestId },
    );
    state('thinking');
    await sleep(5, signal);
    switch (scenario) {
      case 'crash': {
        state('streaming_assistant_message');
        notify({ type: 'assistant_text_delta', messageId: randomUUID(), blockIndex: 0, textDelta: 'working on it' });
        const use = toolUse('Execute', { command: 'make build', riskLevel: 'medium', riskLevelReason: 'mock' });
        notify({ type: 'tool_call', toolUse: use }, false);
        process.stderr.write('mock-droid: crashing mid-turn as scripted\n');
        process.stdout.write('', () => process.exit(1)); // flush what was written, then die
        await new Promise(() => {}); // never resolves: the process is exiting
        break;
      }
      case 'malformed':
        process.stdout.write('garbage{{\n');
        process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', factoryApiVersion: '1.0.0', method: 'droid.session_notification', params: {} })}\n`);
        break;
      case 'silence':
      case 'deaf':
        setInterval(() => {}, 60_000); // a hung CLI: alive even after stdin closes
        await new Promise(() => {}); // never completes, ignores interrupts
        break;
      case 'permission':
        await permissionTurn(messageId, signal, ['proceed_once', 'proceed_always', 'cancel']);
        break;
      case 'permission-no-once':
        await permissionTurn(messageId, signal, ['proceed_always', 'cancel']);
        break;
      case 'ask':
        await askTurn(messageId, signal);
        break;
      case 'unknown-request':
        // Bounded wait so a client that never answers still gets a completed turn.
        await ask('droid.some_future_method', { note: 'a method this client does not know' }, signal, 10_000);
        break;
      case 'auth-error-0215': {
        const text = 'No access token available';
        notify({
          type: 'error',
          message: text,
          errorType: 'Error',
          timestamp: new Date().toISOString(),
          error: { name: 'AuthenticationError', message: text },
        });
        addMessage({ id: randomUUID(), role: 'system', content: [{ type: 'text', text: 'Authentication failed. Please log in.' }], parentId: messageId });
        complete(messageId, 'error', zeroUsage(), started);
        return;
      }
      case 'credits': {
        const sum = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k] + b[k]]));
        const step = { ...zeroUsage(), inputTokens: 10, factoryCredits: 0.5 };
        let spent = zeroUsage();
        for (let i = 0; i < 20; i++) {
          await sleep(100, signal);
          spent = sum(spent, step);
          const total = sum(session.cumulative, spent);
          notify({
            type: 'session_token_usage_changed',
            sessionId: session.sessionId,
            tokenUsage: total,
            inclusiveTokenUsage: total,
            lastCallTokenUsage: { inputTokens: 10, outputTokens: 0, cacheReadTokens: 0 },
          });
        }
        session.cumulative = sum(session.cumulative, spent);
        break;
      }
      case 'slow': {
        const id = randomUUID();
        state('streaming_assistant_message');
        for (let i = 0; i < 6000; i++) {
          notify({ type: 'assistant_text_delta', messageId: id, blockIndex: 0, textDelta: `tick${i} ` });
          await sleep(100, signal);
        }
        break;
      }
      default:
        break;
    }
    if (signal.aborted) throw new Cancelled();
    finishText(prompt, messageId);
    complete(scenario === 'wrong-turn' ? `not-${messageId}` : messageId, 'completed', { ...TURN_USAGE }, started);
  } catch (e) {
    if (!(e instanceof Cancelled)) throw e;
    addMessage({
      id: randomUUID(),
      role: 'system',
      content: [{ type: 'text', text: 'Request cancelled by user' }],
      visibility: 'llm_only',
      parentId: messageId,
    });
    complete(messageId, 'cancelled', zeroUsage(), started);
  } finally {
    turn = null;
    if (stdinClosed && !lingering) process.exit(0);
  }
}

// ---- methods ------------------------------------------------------------

const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const invalidParams = (id, method, what) => fail(id, -32602, `Invalid request for ${method}: ${what}`);
const noSession = (id) => fail(id, -32603, 'No active session. Call initialize_session or load_session first.');

const methods = {
  async 'droid.initialize_session'(id, p) {
    const missing = ['machineId', 'cwd'].filter((k) => typeof p[k] !== 'string').map((k) => `params.${k}: Required`);
    if (missing.length) return invalidParams(id, 'droid.initialize_session', missing.join('; '));
    if (INIT_DELAY > 0) await new Promise((r) => setTimeout(r, INIT_DELAY));
    const settings = {
      modelId: p.modelId ?? 'mock-model',
      reasoningEffort: p.reasoningEffort ?? 'none',
      autonomyLevel: p.autonomyLevel ?? 'off',
      interactionMode: p.interactionMode ?? 'auto',
    };
    session = { sessionId: randomUUID(), cwd: p.cwd, settings, messages: [], cumulative: zeroUsage() };
    persist();
    notify({ type: 'mcp_status_changed', servers: [], summary: { total: 0, connected: 0, connecting: 0, failed: 0, disabled: 0 } }, false);
    notify({ type: 'settings_updated', settings: fullSettings() }, false);
    respond(id, { sessionId: session.sessionId, hostId: HOST_ID, session: { messages: [] }, settings: fullSettings(), availableModels: MODELS });
  },
  'droid.load_session'(id, p) {
    if (typeof p.sessionId !== 'string') return invalidParams(id, 'droid.load_session', 'params.sessionId: Required');
    if (!STATE_DIR || !existsSync(sessionFile(p.sessionId))) return fail(id, -32004, 'Session not found');
    session = JSON.parse(readFileSync(sessionFile(p.sessionId), 'utf8'));
    respond(id, {
      session: { messages: session.messages },
      settings: fullSettings(),
      cwd: session.cwd,
      availableModels: MODELS,
      isAgentLoopInProgress: false,
      workingState: 'idle',
      ...(process.env.MOCK_DROID_LOAD_NO_USAGE ? {} : { tokenUsage: session.cumulative }),
    });
  },
  'droid.list_models'(id) {
    respond(id, { models: MODELS });
  },
  'droid.add_user_message'(id, p) {
    if (typeof p.text !== 'string' || typeof p.messageId !== 'string') {
      return invalidParams(id, 'droid.add_user_message', 'params.text and params.messageId: Required');
    }
    respond(id, {});
    // The real CLI acknowledges first and then reports the missing session
    // with a second response to the same id; mirrored on purpose.
    if (!session) return noSession(id);
    turnChain = turnChain.then(() => runTurn(p.text, p.messageId, id)).catch((e) => process.stderr.write(`mock-droid: turn failed: ${e?.stack ?? e}\n`));
  },
  'droid.interrupt_session'(id) {
    if (turn?.deaf) return; // never answered: the request can only time out
    respond(id, {});
    if (turn && !turn.ignoresInterrupt) turn.abort.abort();
  },
  async 'droid.close_session'(id) {
    if (lingering) return; // never answered
    // Let a running turn report its cancellation before the session goes away;
    // a hung (silence) turn is left hanging, session and all.
    if (turn && !turn.ignoresInterrupt) {
      turn.abort.abort();
      await turnChain;
    }
    persist();
    respond(id, {});
    if (!turn) session = null;
  },
  // Session powers (issue 40): only what the fault tests need.
  'droid.get_rewind_info'(id) {
    if (!session) return noSession(id);
    respond(id, { availableFiles: [], createdFiles: [], evictedFiles: [] });
  },
  'droid.execute_rewind'(id) {
    if (!session) return noSession(id);
    if (process.env.MOCK_DROID_REWIND_HANG) return; // never answered: a droid stuck mid-restore
    fail(id, -32603, 'execute_rewind: the mock rewinds nothing (set MOCK_DROID_REWIND_HANG to hang it)');
  },
  'droid.update_session_settings'(id, p) {
    if (!session) return noSession(id);
    for (const k of ['modelId', 'reasoningEffort', 'autonomyLevel', 'interactionMode']) if (p[k] !== undefined) session.settings[k] = p[k];
    persist();
    respond(id, {});
    notify({ type: 'settings_updated', settings: fullSettings() }, false);
  },
};

// The real CLI's rename waits on cloud session sync (~15 s offline, measured).
if (process.env.MOCK_DROID_RENAME_DELAY_MS !== undefined) {
  methods['droid.rename_session'] = (id) => {
    if (!session) return noSession(id);
    setTimeout(() => respond(id, { success: true }), Number(process.env.MOCK_DROID_RENAME_DELAY_MS));
  };
}

// ---- framing ------------------------------------------------------------

const TYPES = new Set(['request', 'response', 'notification']);

/** The same shape checks the real CLI applies before looking at the method. */
function wellFormed(f) {
  if (!isObj(f) || f.jsonrpc !== '2.0' || typeof f.factoryApiVersion !== 'string' || !TYPES.has(f.type)) return false;
  if ('id' in f && typeof f.id !== 'string') return false;
  if (f.type === 'request') return typeof f.id === 'string' && typeof f.method === 'string';
  if (f.type === 'notification') return typeof f.method === 'string';
  return typeof f.id === 'string';
}

function onLine(line) {
  if (!line.trim()) return;
  let frame;
  try {
    frame = JSON.parse(line);
  } catch {
    log({ unparsable: line });
    return fail(null, -32700, 'Invalid JSON'); // the real CLI's wording for this case
  }
  log(frame);
  if (!wellFormed(frame)) return fail(null, -32700, 'Invalid JSON-RPC message');
  if (frame.type === 'response') return pending.get(frame.id)?.(frame);
  if (frame.type === 'notification') return; // nothing the client may notify about yet
  const handler = methods[frame.method];
  if (!handler) return fail(frame.id, -32601, `Unknown method: ${frame.method}`);
  if (!isObj(frame.params)) return invalidParams(frame.id, frame.method, 'params: Required');
  Promise.resolve(handler(frame.id, frame.params)).catch((e) => fail(frame.id, -32603, String(e?.message ?? e)));
}

let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    onLine(line);
  }
});
// The real CLI exits about 1 s after EOF when idle, but keeps running while a
// turn is in flight; the mock exits at once when idle, else after the turn.
let stdinClosed = false;
process.stdin.on('end', () => {
  stdinClosed = true;
  if (!turn && !lingering) exitWhenIdle();
});
/** MOCK_DROID_EXIT_DELAY_MS: linger after EOF like the real CLI (~1 s), logging a voluntary exit. */
function exitWhenIdle() {
  const delay = process.env.MOCK_DROID_EXIT_DELAY_MS;
  if (delay === undefined) process.exit(0);
  setTimeout(() => {
    log({ exit: 'voluntary' });
    process.exit(0);
  }, Number(delay));
}
process.stdout.on('error', () => process.exit(0)); // client went away
