import { describe, expect, it } from 'vitest';
import { classifyAttachFailure, listedTools, planDisabled, verifyInventory, type ListedTool } from '../../../src/droid/amp-tools.js';

// Shapes as droid 0.225.2 lists a session-attached server's tools.
const tool = (name: string, allowed = true, llm = name.replace(/[^A-Za-z0-9_-]/g, '_')): ListedTool => ({
  id: `mcp_amp-puck_${name}`,
  llmId: `amp-puck___${llm}`,
  currentlyAllowed: allowed,
});
const native = (id: string, llmId: string, allowed = true): ListedTool => ({ id, llmId, currentlyAllowed: allowed });
const puck = tool('puck');
const admin = [tool('manage_amp'), tool('find_thread'), tool('read_thread'), tool('share_thread_publicly')];

describe('planDisabled', () => {
  it('disables every tool of the server but puck, by id', () => {
    expect(planDisabled([puck, ...admin, native('read-cli', 'Read')], [])).toEqual(admin.map((t) => t.id));
  });

  it('keeps what the session already disables when droid still knows it, under either spelling', () => {
    const tools = [puck, admin[0]!, native('task-cli', 'Task'), native('execute-cli', 'Execute')];
    expect(planDisabled(tools, ['Task', 'execute-cli'])).toEqual(['Task', 'execute-cli', admin[0]!.id]);
  });

  it('drops ids droid no longer knows (they would break list_tools) and saved ids of the server (they are recomputed)', () => {
    const tools = [puck, admin[0]!];
    expect(planDisabled(tools, ['mcp_amp-puck_removed_tool', 'gone-cli', 'mcp_amp-puck_puck', 'amp-puck___puck'])).toEqual([admin[0]!.id]);
  });

  it('does not take a look-alike for puck', () => {
    const lookalike = tool('puck ');
    expect(lookalike.llmId).toBe('amp-puck___puck_');
    expect(planDisabled([puck, lookalike], [])).toEqual(['mcp_amp-puck_puck ']);
  });
});

describe('verifyInventory', () => {
  it('passes when puck is the only usable tool of the server', () => {
    expect(verifyInventory([puck, ...admin.map((t) => ({ ...t, currentlyAllowed: false })), native('read-cli', 'Read')])).toEqual({ ok: true });
  });

  it('fails when any other tool of the server is usable, or says nothing about it', () => {
    expect(verifyInventory([puck, tool('manage_amp')])).toEqual({ ok: false, code: 'amp_mcp_admin_tool_exposed', tools: ['mcp_amp-puck_manage_amp'] });
    expect(verifyInventory([puck, { id: 'mcp_amp-puck_new_tool' }])).toMatchObject({ code: 'amp_mcp_admin_tool_exposed' });
    // droid 0.225.2 disables the real puck when told to disable `mcp_amp-puck_puck ` (measured): both faults show.
    expect(verifyInventory([tool('puck', false), tool('puck ', true)])).toMatchObject({ code: 'amp_mcp_admin_tool_exposed', tools: ['mcp_amp-puck_puck '] });
  });

  it('fails when puck is absent or not usable', () => {
    expect(verifyInventory([...admin.map((t) => ({ ...t, currentlyAllowed: false }))])).toEqual({ ok: false, code: 'amp_mcp_tool_missing', listed: false });
    expect(verifyInventory([tool('puck', false)])).toEqual({ ok: false, code: 'amp_mcp_tool_missing', listed: true });
    expect(verifyInventory([{ id: 'mcp_amp-puck_puck', llmId: 'amp-puck___puck' }])).toMatchObject({ code: 'amp_mcp_tool_missing' });
  });
});

describe('listedTools', () => {
  it('keeps entries with an id and refuses results without a tool list', () => {
    expect(listedTools({ tools: [puck, { llmId: 'x' }, null, 'x'] })).toEqual([puck]);
    expect(listedTools({})).toBeNull();
    expect(listedTools(null)).toBeNull();
  });
});

describe('classifyAttachFailure', () => {
  it('no HTTP answer: unreachable; 401/403: authorization; any other answer: droid did not start it', () => {
    expect(classifyAttachFailure({ answered: false, detail: 'ECONNREFUSED' })).toBe('amp_mcp_unreachable');
    expect(classifyAttachFailure({ answered: true, status: 401 })).toBe('amp_mcp_auth_required');
    expect(classifyAttachFailure({ answered: true, status: 403 })).toBe('amp_mcp_auth_required');
    for (const status of [200, 400, 404, 405, 500, 503]) expect(classifyAttachFailure({ answered: true, status })).toBe('amp_mcp_not_started');
  });
});
