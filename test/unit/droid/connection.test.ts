import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DroidConnection } from '../../../src/droid/connection.js';
import { DroidError } from '../../../src/droid/errors.js';

/** A connection wired to in-memory pipes; `peer` plays droid. */
function pair(timeoutMs = 1_000, maxLineChars?: number) {
  const toUs = new PassThrough();
  const toDroid = new PassThrough();
  const sent: Record<string, unknown>[] = [];
  toDroid.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n').filter(Boolean)) sent.push(JSON.parse(line));
  });
  const connection = new DroidConnection({ input: toUs, output: toDroid, defaultTimeoutMs: timeoutMs, maxLineChars });
  const peer = (frame: unknown) => toUs.write(JSON.stringify(frame) + '\n');
  return { connection, sent, peer, toUs };
}

const base = { jsonrpc: '2.0', factoryApiVersion: '1.0.0' };
const tick = () => new Promise((r) => setTimeout(r, 5));

describe('DroidConnection', () => {
  it('sends typed frames with string ids and resolves the matching response', async () => {
    const { connection, sent, peer } = pair();
    const call = connection.request('droid.list_models', {});
    await tick();
    expect(sent[0]).toMatchObject({ ...base, type: 'request', method: 'droid.list_models' });
    expect(typeof sent[0]!.id).toBe('string');
    peer({ ...base, type: 'response', id: sent[0]!.id, result: { models: [] } });
    await expect(call).resolves.toEqual({ models: [] });
  });

  it('rejects with the RPC error, naming a missing session', async () => {
    const { connection, sent, peer } = pair();
    const call = connection.request('droid.load_session', { sessionId: 'x' });
    await tick();
    peer({ ...base, type: 'response', id: sent[0]!.id, error: { code: -32004, message: 'Session not found' } });
    await expect(call).rejects.toMatchObject({ code: 'droid_session_not_found' });
  });

  it('times out a call droid never answers', async () => {
    const { connection } = pair(50);
    await expect(connection.request('droid.initialize_session', {})).rejects.toMatchObject({ code: 'droid_request_timeout' });
  });

  it('surfaces id:null errors and malformed frames as diagnostics', async () => {
    const { connection, peer, toUs } = pair();
    peer({ ...base, type: 'response', id: null, error: { code: -32700, message: 'Invalid JSON-RPC message' } });
    peer({ jsonrpc: '2.0', id: 'x', result: {} });
    toUs.write('not json at all\n');
    await tick();
    expect(connection.diagnostics.map((d) => d.kind)).toEqual(['protocol_error', 'invalid_frame', 'stray_line']);
    expect(connection.diagnostics[0]!.detail).toContain('-32700');
  });

  it('drops a frame line over the bound as line_too_long and keeps reading the next frames', async () => {
    const { connection, sent, peer, toUs } = pair(1_000, 500);
    const call = connection.request('droid.list_models', {});
    await tick();
    toUs.write(JSON.stringify({ ...base, type: 'response', id: sent[0]!.id, result: { huge: 'h'.repeat(2_000) } }).slice(0, 300));
    toUs.write(`${'h'.repeat(2_000)}"}}\n`);
    peer({ ...base, type: 'response', id: sent[0]!.id, result: { models: [] } });
    await expect(call).resolves.toEqual({ models: [] });
    expect(connection.diagnostics.map((d) => d.kind)).toEqual(['line_too_long']);
    expect(connection.diagnostics[0]!.detail).toMatch(/^line of at least \d+ characters dropped \(limit 500\): \{"jsonrpc"/);
  });

  it('answers unknown server requests with -32601 and known ones through the handler', async () => {
    const { connection, sent, peer } = pair();
    peer({ ...base, type: 'request', id: 'r1', method: 'droid.future_thing', params: {} });
    await tick();
    expect(sent[0]).toMatchObject({ type: 'response', id: 'r1', error: { code: -32601 } });
    connection.setServerRequestHandler(() => ({ result: { selectedOption: 'cancel' } }));
    peer({ ...base, type: 'request', id: 'r2', method: 'droid.request_permission', params: {} });
    await tick();
    expect(sent[1]).toMatchObject({ ...base, type: 'response', id: 'r2', result: { selectedOption: 'cancel' } });
  });

  it('a throwing handler still answers, with an internal error', async () => {
    const { connection, sent, peer } = pair();
    connection.setServerRequestHandler(() => {
      throw new Error('boom');
    });
    peer({ ...base, type: 'request', id: 'r1', method: 'droid.ask_user', params: {} });
    await tick();
    expect(sent[0]).toMatchObject({ id: 'r1', error: { code: -32603, message: 'boom' } });
  });

  it('close rejects everything outstanding at once and later calls too', async () => {
    const { connection } = pair();
    const call = connection.request('droid.add_user_message', {});
    connection.close(new DroidError('droid_exited', 'droid exited (code 1)'));
    await expect(call).rejects.toMatchObject({ code: 'droid_exited' });
    await expect(connection.request('droid.interrupt_session')).rejects.toMatchObject({ code: 'droid_exited' });
  });
});
