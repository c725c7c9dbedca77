/**
 * The preflight's calls against a scripted stand-in for droid's two methods
 * (the real CLI is covered end to end); the probe is injected.
 */
import { describe, expect, it } from 'vitest';
import { DroidRpcError } from '../../../../src/droid/errors.js';
import type { EndpointProbe, ListedTool } from '../../../../src/droid/amp-tools.js';
import { dropStaleAmpDisables, preflightAmp, type PreflightClient } from '../../../../src/worker/child/amp-preflight.js';

const URL = 'http://127.0.0.1:9/mcp';
const tool = (name: string): ListedTool => ({ id: `mcp_amp-puck_${name}`, llmId: `amp-puck___${name}`, currentlyAllowed: true });
const native = (id: string, llmId: string): ListedTool => ({ id, llmId, currentlyAllowed: true });

/** A droid that applies disables like 0.225.2, and fails list_tools while it disables an id it does not know. */
function fakeDroid(tools: ListedTool[], disabled: string[] = [], over: { listFails?: number } = {}) {
  const state = { disabled: [...disabled], updates: [] as string[][], lists: 0, listFails: over.listFails ?? 0 };
  const client: PreflightClient = {
    async listTools() {
      state.lists++;
      const known = new Set(tools.flatMap((t) => [t.id, t.llmId]));
      if (state.listFails > 0) {
        state.listFails--;
        throw new DroidRpcError('droid.list_tools', { code: -32603, message: 'Internal error' });
      }
      if (state.disabled.some((id) => !known.has(id))) throw new DroidRpcError('droid.list_tools', { code: -32603, message: 'Unknown tool identifier(s)' });
      return { tools: tools.map((t) => ({ ...t, currentlyAllowed: !state.disabled.includes(t.id) && !state.disabled.includes(t.llmId!) })) };
    },
    async setDisabledToolIds(ids) {
      state.updates.push([...ids]);
      state.disabled = [...ids];
    },
  };
  return { client, state };
}

const never = async (): Promise<EndpointProbe> => {
  throw new Error('probe must not be called');
};

describe('preflightAmp', () => {
  const healthy = [tool('puck'), tool('manage_amp'), tool('find_thread'), native('task-cli', 'Task'), native('read-cli', 'Read')];

  it('disables every Amp tool but puck, keeping the session’s own disables, and probes nothing', async () => {
    const { client, state } = fakeDroid(healthy, ['Task']);
    await preflightAmp(client, URL, ['Task'], { probe: never });
    expect(state.disabled).toEqual(['Task', 'mcp_amp-puck_manage_amp', 'mcp_amp-puck_find_thread']);
    expect(state.lists).toBe(2);
  });

  it('recovers from saved disables of tools droid no longer knows by starting from none', async () => {
    const stale = ['mcp_amp-puck_retired_tool', 'Task'];
    const { client, state } = fakeDroid(healthy, stale);
    await preflightAmp(client, URL, stale, { probe: never });
    expect(state.updates[0]).toEqual([]);
    expect(state.disabled).toEqual(['Task', 'mcp_amp-puck_manage_amp', 'mcp_amp-puck_find_thread']);
  });

  it('amp_mcp_setup_failed when droid cannot list its tools even without disables', async () => {
    const { client } = fakeDroid(healthy, [], { listFails: 2 });
    await expect(preflightAmp(client, URL, [], { probe: never })).rejects.toMatchObject({
      code: 'amp_mcp_setup_failed',
      message: expect.stringContaining('nothing was submitted'),
    });
  });

  it.each([
    [{ answered: false, detail: 'ECONNREFUSED' }, 'amp_mcp_unreachable'],
    [{ answered: true, status: 401 }, 'amp_mcp_auth_required'],
    [{ answered: true, status: 404 }, 'amp_mcp_not_started'],
  ] as const)('no tool of the server: the probe (%j) names the cause %s', async (probe, code) => {
    const { client, state } = fakeDroid([native('read-cli', 'Read')]);
    const probed: string[] = [];
    const err = await preflightAmp(client, URL, [], { probe: async (u) => (probed.push(u), probe) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code });
    expect((err as Error).message).toMatch(/nothing was submitted\. \S/);
    expect(probed).toEqual([URL]);
    expect(state.updates).toEqual([]);
  });

  it('amp_mcp_tool_missing without puck, amp_mcp_admin_tool_exposed when a tool stays usable', async () => {
    await expect(preflightAmp(fakeDroid([tool('manage_amp')]).client, URL, [], { probe: never })).rejects.toMatchObject({ code: 'amp_mcp_tool_missing' });
    const stubborn = fakeDroid([tool('puck'), tool('manage_amp')]);
    stubborn.client.setDisabledToolIds = async () => undefined; // droid ignores the update
    await expect(preflightAmp(stubborn.client, URL, [], { probe: never })).rejects.toMatchObject({ code: 'amp_mcp_admin_tool_exposed' });
  });
});

describe('dropStaleAmpDisables', () => {
  it('drops only Amp ids, and calls droid only when there are some', async () => {
    const { client, state } = fakeDroid([native('task-cli', 'Task')]);
    await dropStaleAmpDisables(client, ['Task']);
    expect(state.updates).toEqual([]);
    await dropStaleAmpDisables(client, ['mcp_amp-puck_manage_amp', 'Task', 'amp-puck___find_thread']);
    expect(state.updates).toEqual([['Task']]);
  });
});
