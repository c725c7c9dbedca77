import { describe, expect, it } from 'vitest';
import { fingerprint, type Intent } from '../../src/controller/fingerprint.js';

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
});
