/**
 * Evidence end to end: the built server over stdio, real workers, real droid,
 * the scripted model. One turn with all three (structured output, changed
 * files, context occupancy); a schema refused before anything is accepted;
 * read and find show the evidence.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gitRepo } from '../../support/git-repo.js';
import { script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, waitForNoDroids, type E2EContext } from '../../support/e2e-context.js';

const TAG = `e2e-evidence-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
let server: RunningServer;

beforeAll(async () => {
  ctx = await makeContext(TAG);
  server = await ctx.start();
});
afterEach(async () => {
  await waitForNoDroids(TAG, 15_000);
});
afterAll(async () => {
  await server?.close();
  await waitForNoProcesses(TAG, 15_000);
  await ctx?.cleanup();
});

interface RunView {
  state: string;
  needsAttention: boolean;
  error: { code: string } | null;
  structuredOutput: Record<string, unknown> | null;
  changes: { added: string[]; modified: string[]; deleted: string[]; renamed: unknown[]; truncated: number; outsideWorkspace: boolean } | null;
  context: { used: number; limit: number; fraction: number } | null;
}
interface Status {
  session: string;
  latestRun: RunView;
}

async function settle(session: string): Promise<Status> {
  for (;;) {
    const waited = await server.ok<{ sessions: Status[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions[0]!;
  }
}

const SCHEMA = {
  type: 'object',
  properties: { summary: { type: 'string' }, filesTouched: { type: 'integer', minimum: 0 } },
  required: ['summary', 'filesTouched'],
  additionalProperties: false,
};

describe('evidence through the MCP tools', () => {
  it('a turn with structured output, changed files and context; read and find show them', async () => {
    const ws = ctx.workspace('evidence-repo');
    gitRepo(ws, { 'README.md': 'hello\n', 'old.txt': 'old\n' });
    const prompt = `do it ${script({
      steps: [
        { name: 'Create', arguments: { file_path: join(ws, 'notes.md'), content: '# notes\n' } },
        { name: 'Execute', arguments: { command: 'rm old.txt && echo more >> README.md', summary: 'edit', riskLevel: 'low', riskLevelReason: 'test' } },
        { name: 'StructuredOutput', arguments: { summary: 'added notes, removed old.txt', filesTouched: 3 } },
      ],
    })}`;
    const accepted = await server.ok<{ metadata: { session: string; run: string } }>('droid_create_session', {
      requestKey: 'ev-1',
      workspace: ws,
      prompt,
      replyTo: null,
      autonomy: 'medium',
      outputSchema: SCHEMA,
    });
    const status = await settle(accepted.metadata.session);
    if (process.env.DROID_MCP_PRINT_EXAMPLE) process.stderr.write(`example status: ${JSON.stringify(status, null, 2)}\n`);
    expect(status.latestRun).toMatchObject({
      state: 'succeeded',
      needsAttention: false,
      error: null,
      structuredOutput: { summary: 'added notes, removed old.txt', filesTouched: 3 },
      changes: { added: ['notes.md'], modified: ['README.md'], deleted: ['old.txt'], renamed: [], truncated: 0, outsideWorkspace: false },
    });
    expect(status.latestRun.context!.used).toBeGreaterThan(0);
    expect(status.latestRun.context!.fraction).toBeGreaterThan(0);
    expect(status.latestRun.context!.fraction).toBeLessThan(1);
    expect(readFileSync(join(ws, 'notes.md'), 'utf8')).toBe('# notes\n');

    const page = await server.ok<{ items: Array<{ type: string; run: string }> }>('droid_read_session', { session: accepted.metadata.session, limit: 100 });
    const types = page.items.map((i) => i.type);
    expect(types).toContain('structured_output');
    expect(types).toContain('changes');

    const found = await server.ok<{ sessions: Status[] }>('droid_find_sessions', { hasChanges: true });
    expect(found.sessions.map((s) => s.session)).toContain(accepted.metadata.session);
  });

  it('refuses a schema droid would reject, with the reason, accepting nothing', async () => {
    const ws = ctx.workspace('evidence-refused');
    const before = existsSync(join(ctx.stateDir, 'journal.jsonl')) ? readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8') : '';
    const refused = await server.call('droid_create_session', {
      requestKey: 'ev-bad',
      workspace: ws,
      prompt: 'x',
      replyTo: null,
      outputSchema: { type: 'array', items: { type: 'string' } },
    });
    expect(refused.isError).toBe(true);
    expect(refused.structured).toMatchObject({ error: { code: 'invalid_arguments', message: expect.stringContaining('object') } });
    const after = existsSync(join(ctx.stateDir, 'journal.jsonl')) ? readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8') : '';
    expect(after).toBe(before);
    const found = await server.ok<{ sessions: Status[] }>('droid_find_sessions', { workspace: ws });
    expect(found.sessions).toEqual([]);
  });
});
