/**
 * Evidence on a turn's result (structured output, changed files, context
 * occupancy) through the real per-turn worker and the real droid CLI, with
 * the scripted model standing in for the provider.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gitRepo } from '../../support/git-repo.js';
import { script } from '../../../src/testbed/scripted-model.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import { snapshotTree } from '../../../src/evidence/git.js';

let workspace: string;
let tag: string;
const BWRAP = '/usr/bin/bwrap';

const real = useRealDroid();

function spec(over: Partial<TurnSpec>): TurnSpec {
  tag = newTag();
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ev-')));
  return realDroidSpec(real.bed, tag, { workspace, ...over });
}

afterEach(async () => {
  await waitForNoProcesses(tag, 10_000);
  rmSync(workspace, { recursive: true, force: true });
});

const exec = (command: string) => ({ name: 'Execute', arguments: { command, summary: 'shell', riskLevel: 'low', riskLevelReason: 'test' } });
const SCHEMA = { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'], additionalProperties: false };

describe('structured output', () => {
  it('returns the valid object the model gave through StructuredOutput, and context stats', async () => {
    const s = spec({ outputSchema: SCHEMA });
    s.prompt = `answer ${script({ tool: { name: 'StructuredOutput', arguments: { answer: 42 } } })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(r.structuredOutput).toEqual({ answer: 42 });
    expect(r.context).toMatchObject({ used: expect.any(Number), limit: expect.any(Number) });
    expect(r.context!.used).toBeGreaterThan(0);
    expect(r.context!.fraction).toBeCloseTo(r.context!.used / r.context!.limit, 3);
    // Not a git work tree: unknown, never an empty list.
    expect(r.changes).toBeNull();
  });

  it('fails structured_output_missing when the model never provides it', async () => {
    const s = spec({ outputSchema: SCHEMA });
    s.prompt = `answer ${script({ text: 'just prose, no structure' })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('failed');
    expect(r.reason).toBe('structured_output_missing');
    expect(r.error?.code).toBe('structured_output_missing');
    expect(r.structuredOutput).toBeNull();
  });

  it('never shows an object that violates the schema (droid 0.225 refuses it itself)', async () => {
    const s = spec({ outputSchema: SCHEMA });
    s.prompt = `answer ${script({ tool: { name: 'StructuredOutput', arguments: { answer: 'forty-two', extra: true } } })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('failed');
    expect(['structured_output_missing', 'structured_output_invalid']).toContain(r.error?.code);
    expect(r.structuredOutput).toBeNull();
    // droid's own validation error reached the model as a tool result.
    expect(JSON.stringify(r.transcript)).toContain('validation failed');
  });

  it('a resumed turn gets its schema through load_session, and context stats again', async () => {
    const first = spec({ prompt: `hi ${script({ text: 'plain first turn' })}` });
    const r1 = await runWorkerTurn(first, tag).done;
    expect(r1.outcome).toBe('succeeded');
    expect(r1.structuredOutput).toBeUndefined();
    expect(r1.context).not.toBeNull();
    await waitForNoProcesses(tag, 10_000);
    const second = realDroidSpec(real.bed, tag, {
      workspace: first.workspace,
      session: { mode: 'resume', droidSessionId: r1.droidSessionId! },
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
      prompt: `again ${script({ tool: { name: 'StructuredOutput', arguments: { ok: true } } })}`,
    });
    const r2 = await runWorkerTurn(second, tag).done;
    expect(r2.outcome).toBe('succeeded');
    expect(r2.structuredOutput).toEqual({ ok: true });
    expect(r2.context!.used).toBeGreaterThan(0);
  });
});

describe('changed files', () => {
  it('reports added, modified (also a file already dirty before), deleted and renamed paths in a git repo', async () => {
    const s = spec({});
    gitRepo(s.workspace, {
      'keep.txt': 'keep\n',
      'edit.txt': 'v1\n',
      'gone.txt': 'bye\n',
      'dirty.txt': 'base\n',
      'old-name.txt': 'moving\n',
      'sub/deep.txt': 'd\n',
    });
    writeFileSync(join(s.workspace, 'dirty.txt'), 'changed before the turn\n');
    s.prompt = `work ${script({
      steps: [
        { name: 'Create', arguments: { file_path: join(s.workspace, 'new.txt'), content: 'new\n' } },
        { name: 'Create', arguments: { file_path: join(s.workspace, 'edit.txt'), content: 'v2\n' } },
        exec('rm gone.txt && mv old-name.txt new-name.txt && echo again >> dirty.txt'),
      ],
    })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(r.changes).toEqual({
      added: ['new.txt'],
      modified: ['dirty.txt', 'edit.txt'],
      deleted: ['gone.txt'],
      renamed: [{ from: 'old-name.txt', to: 'new-name.txt' }],
      truncated: 0,
      outsideWorkspace: false,
    });
  });

  it('sees a file written by a shell command, and flags a path outside the workspace (sandboxed git)', async () => {
    const s = spec({});
    gitRepo(s.workspace, { 'a.txt': 'a\n' });
    s.sandbox = { mode: 'bwrap', bwrapPath: BWRAP, hiddenDirs: [], hiddenFiles: [] };
    s.prompt = `shell ${script({ tool: exec('printf x > made-by-shell.txt; cat /etc/hostname > /dev/null') })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(r.changes).toMatchObject({ added: ['made-by-shell.txt'], modified: [], deleted: [], outsideWorkspace: true });
    expect(readFileSync(join(s.workspace, 'made-by-shell.txt'), 'utf8')).toBe('x');
  });

  it("runs git inside the turn's sandbox: a clean filter the repository configures cannot write outside the workspace", async () => {
    const s = spec({});
    gitRepo(s.workspace, { 'a.txt': 'a\n' });
    s.sandbox = { mode: 'bwrap', bwrapPath: BWRAP, hiddenDirs: [], hiddenFiles: [] };
    // A writer turn controls the repository's config and attributes; git's status runs the filter on the changed file.
    // (droid runs git status itself, inside the turn's sandbox, so only a write outside the workspace tells.)
    const outside = `${s.workspace}-filter-ran-outside`;
    execFileSync('git', ['config', 'filter.rigged.clean', `sh -c 'touch ${outside}; cat'`], { cwd: s.workspace });
    writeFileSync(join(s.workspace, '.gitattributes'), '* filter=rigged\n');
    s.prompt = `shell ${script({ tool: exec('printf changed > a.txt') })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(r.changes).toMatchObject({ modified: ['a.txt'], deleted: [] });
    expect(existsSync(outside), 'the filter wrote outside the workspace').toBe(false);
  });

  it('in a read-only turn, git runs on a read-only workspace: a clean filter the repository configures cannot write into it', async () => {
    const s = spec({ autonomy: 'off' });
    gitRepo(s.workspace, { 'a.txt': 'a\n' });
    s.sandbox = { mode: 'bwrap', bwrapPath: BWRAP, hiddenDirs: [], hiddenFiles: [] };
    // Rigged before the turn (by an earlier writer turn, say); the file is dirty at the same size, so git re-reads it through the filter.
    const inside = join(s.workspace, 'filter-ran-inside');
    execFileSync('git', ['config', 'filter.rigged.clean', `sh -c 'touch ${inside}; cat'`], { cwd: s.workspace });
    writeFileSync(join(s.workspace, '.gitattributes'), '* filter=rigged\n');
    writeFileSync(join(s.workspace, 'a.txt'), 'b\n');
    s.prompt = 'say hello';
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(existsSync(inside), 'git wrote into the read-only workspace').toBe(false);
  });

  it("never runs the fsmonitor hook a repository's config names", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ev-fsm-')));
    try {
      gitRepo(dir, { 'a.txt': 'a\n' });
      const marker = join(dir, '..', `${randomUUID()}-fsmonitor-ran`);
      const hook = join(dir, '.git', 'rigged-fsmonitor');
      writeFileSync(hook, `#!/bin/sh\ntouch ${marker}\nexit 1\n`, { mode: 0o755 });
      execFileSync('git', ['config', 'core.fsmonitor', hook], { cwd: dir });
      writeFileSync(join(dir, 'a.txt'), 'changed\n');
      const state = await snapshotTree({ workspace: dir, launcher: null, deadline: Date.now() + 10_000 });
      expect(state?.dirty.get('a.txt')).toBeDefined();
      expect(existsSync(marker), 'the fsmonitor hook ran').toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is null (unknown) in a folder that is not a git work tree', async () => {
    const s = spec({});
    s.prompt = `shell ${script({ tool: exec('printf x > f.txt') })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    expect(readFileSync(join(s.workspace, 'f.txt'), 'utf8')).toBe('x');
    expect(r.changes).toBeNull();
  });

  it('an off (read-only) turn in a git repo shows no changes, as an empty set, not null', async () => {
    const s = spec({ autonomy: 'off' });
    gitRepo(s.workspace, { 'a.txt': 'a\n' });
    writeFileSync(join(s.workspace, 'pre-existing-dirt.txt'), 'x');
    s.prompt = `try ${script({ tool: { name: 'Create', arguments: { file_path: join(s.workspace, 'nope.txt'), content: 'no\n' } } })}`;
    const r = await runWorkerTurn(s, tag).done;
    expect(r.outcome).toBe('succeeded');
    // Spec mode: droid refuses the write (declined or not offered); the file is never made.
    expect(existsSync(join(s.workspace, 'nope.txt'))).toBe(false);
    expect(r.changes).toEqual({ added: [], modified: [], deleted: [], renamed: [], truncated: 0, outsideWorkspace: false });
  });
});
