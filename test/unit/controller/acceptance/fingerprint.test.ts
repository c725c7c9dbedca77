import { describe, expect, it } from 'vitest';
import { fingerprint, type Intent } from '../../../../src/controller/acceptance/fingerprint.js';

/** sha256 the build before reply-back computed for the two intents below (old send intents carried the detached session's replyTo: null). */
const LEGACY_SEND = '0aec962ff0e922fec303af1f787d5699bd6ae4d295134ea5c18322bf20cd1416';
const LEGACY_CREATE = '2e3c20fc6e51d9626559398b951a4a0ba63fdabce37370e3e10c51f9ccaf2663';

const intent: Intent = { kind: 'create', target: '/r', prompt: 'do it', interrupt: false, replyTo: null, title: 't', labels: ['b', 'a'] };

describe('fingerprint', () => {
  it('is a sha256 hex that does not contain the prompt', () => {
    const f = fingerprint(intent);
    expect(f).toMatch(/^[0-9a-f]{64}$/);
    expect(f).not.toContain('do it');
  });

  it('ignores label order and Unicode normalization form', () => {
    expect(fingerprint({ ...intent, labels: ['a', 'b'] })).toBe(fingerprint(intent));
    expect(fingerprint({ ...intent, prompt: 'e\u0301' })).toBe(fingerprint({ ...intent, prompt: '\u00e9' }));
  });

  it('changes with any part of the intent', () => {
    const base = fingerprint(intent);
    for (const change of [{ prompt: 'do it!' }, { target: '/r2' }, { kind: 'send' as const }, { interrupt: true }, { title: null }]) {
      expect(fingerprint({ ...intent, ...change })).not.toBe(base);
    }
  });

  it('tells an omitted replyTo on send (keep the route) from an explicit one, and from a detach', () => {
    const send: Intent = { ...intent, kind: 'send', target: 'session-1', replyTo: undefined };
    const A = 'T-11111111-2222-4333-8444-555555555555';
    const prints = [send, { ...send, replyTo: null }, { ...send, replyTo: A }, { ...send, replyTo: 'T-99999999-2222-4333-8444-555555555555' }].map(fingerprint);
    expect(new Set(prints).size).toBe(4);
    // create's recipient is part of it too
    expect(fingerprint({ ...intent, replyTo: A })).not.toBe(fingerprint(intent));
  });

  it("keeps the fingerprints of requests accepted before reply-back (send: replyTo was the detached session's null)", () => {
    // Values computed by the previous build for these exact intents.
    expect(fingerprint({ ...intent, kind: 'send', target: 'session-1', replyTo: undefined })).toBe(LEGACY_SEND);
    expect(fingerprint(intent)).toBe(LEGACY_CREATE);
  });

  it('tells every session power from its absence and from each other (issue 40), and leaves older fingerprints alone', () => {
    const send: Intent = { ...intent, kind: 'send', target: 'session-1', replyTo: undefined };
    const prints = [
      intent,
      { ...intent, forkFrom: { session: 's', run: null } },
      { ...intent, forkFrom: { session: 's', run: 'r' } },
      { ...intent, forkFrom: { session: 's2', run: null } },
      send,
      { ...send, rewindTo: 'r' },
      { ...send, rewindTo: 'r2' },
      { ...send, compact: true as const },
    ].map(fingerprint);
    expect(new Set(prints).size).toBe(prints.length);
    expect(fingerprint(send)).toBe(LEGACY_SEND);
  });
});
