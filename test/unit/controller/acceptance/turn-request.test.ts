import { describe, expect, it } from 'vitest';
import { sessionNetwork } from '../../../../src/controller/acceptance/turn-request.js';
import { fingerprint, type Intent } from '../../../../src/controller/acceptance/fingerprint.js';
import type { SandboxSpec } from '../../../../src/sandbox/sandbox.js';

const proxy: SandboxSpec = {
  mode: 'bwrap',
  bwrapPath: '/usr/bin/bwrap',
  hiddenDirs: [],
  hiddenFiles: [],
  network: { mode: 'proxy', allow: [], nodePath: '/n', helperPath: '/h' },
};
const open: SandboxSpec = { mode: 'bwrap', bwrapPath: '/usr/bin/bwrap', hiddenDirs: [], hiddenFiles: [], network: { mode: 'open' } };
const off: SandboxSpec = { mode: 'off' };

describe("a session's network (issue 37)", () => {
  it('may ask for less than the host allows, never more', () => {
    expect(sessionNetwork(undefined, proxy)).toBeNull();
    expect(sessionNetwork('host', proxy)).toBeNull();
    expect(sessionNetwork('model-only', proxy)).toBe('model-only');
    expect(sessionNetwork('model-only', open)).toBe('model-only');
    expect(sessionNetwork('open', open)).toBeNull();
    expect(() => sessionNetwork('open', proxy)).toThrow(expect.objectContaining({ code: 'network_above_ceiling', action: expect.stringContaining('network') }));
    expect(() => sessionNetwork('model-only', off)).toThrow(expect.objectContaining({ code: 'network_unavailable' }));
  });

  it("of a fork is never wider than its source's (issue 40)", () => {
    const modelOnly = { network: 'model-only' as const };
    expect(sessionNetwork(undefined, proxy, modelOnly)).toBe('model-only');
    expect(sessionNetwork('model-only', open, modelOnly)).toBe('model-only');
    expect(() => sessionNetwork('host', open, modelOnly)).toThrow(
      expect.objectContaining({ code: 'network_above_ceiling', action: expect.stringContaining('Omit network') }),
    );
    expect(() => sessionNetwork('open', open, modelOnly)).toThrow(expect.objectContaining({ code: 'network_above_ceiling' }));
    expect(sessionNetwork(undefined, proxy, {})).toBeNull();
    expect(sessionNetwork('model-only', proxy, {})).toBe('model-only');
    // On a host without the sandbox, omitting network cannot help: the action says what can.
    expect(() => sessionNetwork(undefined, off, modelOnly)).toThrow(
      expect.objectContaining({ code: 'network_unavailable', action: expect.stringContaining('new session') }),
    );
    // A fork of a session with the host's policy that asks for model-only itself is told what any session is.
    expect(() => sessionNetwork('model-only', off, {})).toThrow(
      expect.objectContaining({ code: 'network_unavailable', action: expect.stringMatching(/^Omit network/) }),
    );
  });

  it('is part of the request fingerprint, and absent leaves older fingerprints unchanged', () => {
    const intent: Intent = { kind: 'create', target: '/w', prompt: 'p', interrupt: false, replyTo: null, title: null, labels: [] };
    expect(fingerprint({ ...intent, network: 'model-only' })).not.toBe(fingerprint(intent));
    expect(fingerprint({ ...intent, network: 'model-only' })).not.toBe(fingerprint({ ...intent, network: 'open' }));
  });
});
