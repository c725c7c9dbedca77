/** Which log lines a client is sent, and with which fields (mcp/log-relay.ts). */
import { describe, expect, it } from 'vitest';
import { relayedLog } from '../../../src/mcp/log-relay.js';

describe('relayedLog', () => {
  it('maps pino levels to MCP levels, from info up', () => {
    const level = (n: number) => relayedLog(n, { session: 's1' }, 'm')?.level;
    expect([20, 30, 40, 50, 60].map(level)).toEqual([undefined, 'info', 'warning', 'error', 'critical']);
  });

  it('relays only lines that name a session, a run or sessions', () => {
    expect(relayedLog(30, { roots: 2 }, 'droid-mcp ready')).toBeUndefined();
    expect(relayedLog(50, { err: new Error('x') }, 'state could not be recorded')).toBeUndefined();
    expect(relayedLog(30, { run: 'r1' }, 'x')).toMatchObject({ data: { run: 'r1' } });
    expect(relayedLog(30, { sessions: ['s1'] }, 'x')).toMatchObject({ data: { sessions: ['s1'] } });
  });

  it('reads own fields only: an inherited session is not a session line', () => {
    const inherited = Object.create({ session: 's1', run: 'r1' }) as object;
    expect(relayedLog(30, inherited, 'x')).toBeUndefined();
    expect(relayedLog(30, Object.assign(Object.create({ state: 'failed' }) as object, { session: 's1' }), 'x')).toEqual({
      level: 'info',
      logger: 'droid-mcp',
      data: { message: 'x', session: 's1' },
    });
  });

  it('keeps the allowed fields and drops everything else (errors, free text, timelines, ids of droid)', () => {
    const fields = {
      session: 's1',
      run: 'r1',
      state: 'failed',
      code: 'droid_failed',
      err: new Error('/private/path exploded'),
      error: 'droid said: session 0f3c… not found',
      droidSessionId: '0f3c-uuid',
      prompt: 'the prompt',
      start: { at: 1, ms: {} },
    };
    expect(relayedLog(40, fields, 'turn ended')).toEqual({
      level: 'warning',
      logger: 'droid-mcp',
      data: { message: 'turn ended', session: 's1', run: 'r1', state: 'failed', code: 'droid_failed' },
    });
  });
});
