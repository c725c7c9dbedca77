import { describe, expect, it } from 'vitest';
import { decideReplyCall, type GateRoute } from '../../../../src/controller/reply-back/reply-gate.js';
import { MAX_HANDLE_CHARS, parseReplyHandle } from '../../../../src/droid/amp-tools.js';
import { isConversationId, nextRoute, provenHandles, routeOf, withReply, type Route } from '../../../../src/controller/reply-back/reply-route.js';
import { runRecord } from '../../../support/records.js';
import { replyPrompt } from '../../../../src/controller/reply-back/reply-prompt.js';

const A = 'T-11111111-2222-4333-8444-555555555555';
const B = 'T-99999999-2222-4333-8444-555555555555';
const route = (replyTo: string | null, ...proven: string[]): GateRoute => ({ replyTo, proven: new Set(proven) });
const send = (conversationID: unknown, message: unknown = 'progress: 3 of 5 done') => ({ action: 'send', params: { conversationID, message } });
const read = (replyHandle: unknown) => ({ action: 'read_reply', params: { replyHandle } });

describe('decideReplyCall', () => {
  it('approves a send to the current recipient only', () => {
    expect(decideReplyCall(route(A), send(A))).toEqual({ approve: true, action: 'send' });
    expect(decideReplyCall(route(A), send(B))).toMatchObject({ approve: false, code: 'reply_misrouted' });
  });

  it('records a send without a conversation, or from a detached session, as a misroute', () => {
    expect(decideReplyCall(route(A), { action: 'send', params: { message: 'hi' } })).toMatchObject({ approve: false, code: 'reply_misrouted' });
    expect(decideReplyCall(route(A), send(''))).toMatchObject({ approve: false, code: 'reply_misrouted' });
    expect(decideReplyCall(route(null), send(A))).toMatchObject({ approve: false, code: 'reply_misrouted' });
    expect(decideReplyCall(route(null), send(null))).toMatchObject({ approve: false, code: 'reply_misrouted' });
  });

  it('refuses sends of any other shape (extra fields could steer Amp elsewhere)', () => {
    expect(decideReplyCall(route(A), { action: 'send', params: { conversationID: A, message: 'x', threadID: B } })).toMatchObject({
      code: 'reply_call_malformed',
    });
    expect(decideReplyCall(route(A), send(A, ''))).toMatchObject({ code: 'reply_call_malformed' });
    expect(decideReplyCall(route(A), send(A, 42))).toMatchObject({ code: 'reply_call_malformed' });
    expect(decideReplyCall(route(A), { ...send(A), to: B })).toMatchObject({ code: 'reply_call_malformed' });
  });

  it('approves read_reply with a proven handle only', () => {
    expect(decideReplyCall(route(A, 'rh-1'), read('rh-1'))).toEqual({ approve: true, action: 'read_reply', handle: 'rh-1' });
    expect(decideReplyCall(route(A, 'rh-1'), read('rh-2'))).toMatchObject({ approve: false, code: 'reply_handle_unproven' });
    expect(decideReplyCall(route(null, 'rh-1'), read('rh-2'))).toMatchObject({ approve: false, code: 'reply_handle_unproven' });
  });

  it('denies missing and malformed handles', () => {
    for (const bad of [undefined, '', 7, null, {}, 'x'.repeat(MAX_HANDLE_CHARS + 1), 'rh\n1']) {
      expect(decideReplyCall(route(A, 'rh-1'), read(bad)), String(bad)).toMatchObject({ approve: false, code: 'reply_handle_missing' });
    }
    expect(decideReplyCall(route(A, 'rh-1'), { action: 'read_reply', params: {} })).toMatchObject({ code: 'reply_handle_missing' });
    expect(decideReplyCall(route(A, 'rh-1'), { action: 'read_reply', params: { replyHandle: 'rh-1', latest: true } })).toMatchObject({
      code: 'reply_handle_missing',
    });
  });

  it('denies every other action and shape', () => {
    for (const bad of [{ action: 'latest_reply', params: {} }, { action: 'send' }, { params: {} }, null, 'send', [], { action: 'send', params: [] }]) {
      expect(decideReplyCall(route(A, 'rh-1'), bad), JSON.stringify(bad)).toMatchObject({ approve: false });
    }
  });
});

describe('parseReplyHandle', () => {
  it('reads a top-level replyHandle from a JSON string or from text blocks', () => {
    expect(parseReplyHandle('{\n  "status": "queued",\n  "replyHandle": "rh-1"\n}')).toBe('rh-1');
    expect(parseReplyHandle([{ type: 'text', text: '{"replyHandle":"rh-2"}' }])).toBe('rh-2');
    expect(
      parseReplyHandle([
        { type: 'text', text: 'queued' },
        { type: 'text', text: '{"replyHandle":"rh-3"}' },
      ]),
    ).toBe('rh-3');
  });

  it('fails closed on anything else', () => {
    for (const bad of [
      'queued; your handle is rh-1',
      '{"data":{"replyHandle":"rh-1"}}',
      '["rh-1"]',
      '{"replyHandle":7}',
      '{"replyHandle":""}',
      [{ type: 'image', text: '{"replyHandle":"rh-1"}' }],
      [
        { type: 'text', text: '{"replyHandle":"rh-1"}' },
        { type: 'text', text: '{"replyHandle":"rh-2"}' },
      ],
      { replyHandle: 'rh-1' },
      null,
      undefined,
    ]) {
      expect(parseReplyHandle(bad), JSON.stringify(bad)).toBeNull();
    }
  });
});

describe('reply routes', () => {
  let n = 0;
  const fresh = () => `route-${++n}`;
  const routed: Route = { replyTo: A, routeId: 'route-0' };

  it('accepts only T- followed by a lowercase UUID as a conversation', () => {
    expect(isConversationId(A)).toBe(true);
    expect(isConversationId('T-aaaaaaaa-2222-4333-8444-5555555555ff')).toBe(true);
    for (const bad of ['T-1', 'T-AAAAAAAA-2222-4333-8444-555555555555', A.slice(2), `${A} `, 't-11111111-2222-4333-8444-555555555555', null])
      expect(isConversationId(bad), String(bad)).toBe(false);
  });

  it('keeps the route when replyTo is omitted or repeated, and starts a new one on retarget or detach', () => {
    expect(nextRoute(routed, undefined, fresh)).toEqual({ route: routed, changed: false });
    expect(nextRoute(routed, A, fresh)).toEqual({ route: routed, changed: false });
    const retarget = nextRoute(routed, B, fresh);
    expect(retarget.changed).toBe(true);
    expect(retarget.route.replyTo).toBe(B);
    expect(retarget.route.routeId).not.toBe(routed.routeId);
    expect(nextRoute(routed, null, fresh)).toEqual({ route: { replyTo: null, routeId: null }, changed: true });
    expect(nextRoute({ replyTo: null, routeId: null }, null, fresh)).toEqual({ route: { replyTo: null, routeId: null }, changed: false });
  });

  it('routing back to the same conversation gets a new route, so its old handles stay dead', () => {
    const away = nextRoute(routed, B, fresh).route;
    const back = nextRoute(away, A, fresh).route;
    expect(back.replyTo).toBe(A);
    expect(back.routeId).not.toBe(routed.routeId);
    const runs = [{ reply: { routeId: 'route-0', accepted: 1, handles: [{ handle: 'rh-old', routeId: 'route-0' }], failure: null } }];
    expect(provenHandles(runs, back.routeId)).toEqual(new Set());
    expect(provenHandles(runs, 'route-0')).toEqual(new Set(['rh-old']));
  });

  it('collects handles of the current route across runs, whatever run proved them', () => {
    const runs = [
      {
        reply: {
          routeId: 'r1',
          accepted: 2,
          handles: [
            { handle: 'h1', routeId: 'r1' },
            { handle: 'h2', routeId: 'r2' },
          ],
          failure: null,
        },
      },
      {},
      { reply: { routeId: 'r2', accepted: 1, handles: [{ handle: 'h3', routeId: 'r2' }], failure: null } },
    ];
    expect(provenHandles(runs, 'r2')).toEqual(new Set(['h2', 'h3']));
    expect(provenHandles(runs, null)).toEqual(new Set());
  });
});

describe('withReply', () => {
  const run = runRecord({ sessionId: 's', seq: 1 });
  const proven = { routeId: 'r1', accepted: 2, handles: [{ handle: 'h', routeId: 'r1' }], failure: null };

  it('keeps what a run proved while its route stays, starts fresh on a new route, and drops it when detached', () => {
    expect(withReply({ ...run, reply: proven }, { replyTo: A, routeId: 'r1' }).reply).toBe(proven);
    expect(withReply({ ...run, reply: proven }, { replyTo: B, routeId: 'r2' }).reply).toEqual({ routeId: 'r2', accepted: 0, handles: [], failure: null });
    expect(withReply({ ...run, reply: proven }, { replyTo: null, routeId: null })).not.toHaveProperty('reply');
    expect(withReply(run, { replyTo: A, routeId: 'r1' }).reply).toEqual({ routeId: 'r1', accepted: 0, handles: [], failure: null });
  });

  it('reads a session written before reply-back as detached', () => {
    expect(routeOf({ replyTo: null })).toEqual({ replyTo: null, routeId: null });
    expect(routeOf({ replyTo: A, replyRouteId: 'r1' })).toEqual({ replyTo: A, routeId: 'r1' });
  });
});

describe('replyPrompt', () => {
  const text = replyPrompt({ replyTo: A, session: 'sess-1', run: 'run-7', specMode: true });

  it('names the recipient, both handles and both call shapes', () => {
    expect(text).toContain(A);
    expect(text).toContain('sess-1');
    expect(text).toContain('run-7');
    expect(text).toContain(JSON.stringify({ action: 'send', params: { conversationID: A, message: '…' } }));
    expect(text).toContain('"action":"read_reply","params":{"replyHandle"');
    expect(text).toContain('amp-puck___puck');
  });

  it('states the rules: progress once, one CHECKPOINT, 6 reads of that handle, never resend, BLOCKED, Spec mode', () => {
    for (const rule of [
      'at most once',
      'CHECKPOINT',
      'marker',
      'evidence',
      'action you propose',
      'decision you need',
      'at most 6 times',
      'never send the question again',
      'BLOCKED',
      'Spec mode',
    ]) {
      expect(text, rule).toContain(rule);
    }
    expect(replyPrompt({ replyTo: A, session: 's', run: 'r', specMode: false })).not.toContain('Spec mode');
  });

  it('never contains a script marker that could be mistaken for the caller prompt', () => {
    expect(text).not.toContain('<<');
  });
});
