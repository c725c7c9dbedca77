/**
 * Seeds a controller state directory directly (snapshot file, written by the
 * store's own snapshot writer), so benchmarks measure the system, not the
 * seeding. Records follow src/shared/records.ts.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../src/store/formats/atomic.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../src/shared/records.js';
import { writeSnapshot } from '../src/store/formats/snapshot.js';
import { runRecord, sessionRecord } from '../test/support/records.js';

export const SEED_AT = '2030-01-01T00:00:00.000Z';

export function seedRun(sessionId: string, seq: number, at = SEED_AT): RunRecord {
  return runRecord({
    sessionId,
    seq,
    fingerprint: 'a'.repeat(64),
    settings: { model: 'model-a', autonomy: 'medium', reasoningEffort: 'high' },
    acceptedAt: at,
    startedAt: at,
    endedAt: at,
    usage: { inputTokens: 1200, outputTokens: 340, cacheCreationTokens: 0, cacheReadTokens: 800, thinkingTokens: 50, factoryCredits: null },
    preview: `Done: updated the parser and added tests (${sessionId}).`,
    events: [
      { at, kind: 'tool_started', detail: 'Read src/parser.ts' },
      { at, kind: 'tool_finished', detail: 'Read src/parser.ts: ok' },
    ],
  });
}

export interface SeedOptions {
  sessions: number;
  runsPerSession: number;
  /** Workspaces are spread over this many project folders under `root`. */
  root?: string;
  /** Distinct creation times, one minute apart, newest last. */
  distinctTimes?: boolean;
}

export async function seedState(dir: string, options: SeedOptions): Promise<{ sessionIds: string[] }> {
  const sessions: SessionRecord[] = [];
  const runs: RunRecord[] = [];
  const root = options.root ?? '/srv/work';
  const base = Date.parse(SEED_AT);
  for (let s = 0; s < options.sessions; s++) {
    const id = `s${s}`;
    const at = options.distinctTimes ? new Date(base + s * 60_000).toISOString() : SEED_AT;
    for (let seq = 1; seq <= options.runsPerSession; seq++) runs.push(seedRun(id, seq, at));
    sessions.push(
      sessionRecord({
        id,
        createdAt: at,
        updatedAt: at,
        workspace: join(root, `project-${s % 50}`),
        title: `session ${s}`,
        labels: s % 3 === 0 ? ['bench', 'backend'] : ['bench'],
        droidSessionId: `droid-${s}`,
        headRunId: `${id}-r${options.runsPerSession}`,
      }),
    );
  }
  await writeSnapshot(dir, 0, { size: sessions.length, values: () => sessions }, { size: runs.length, values: () => runs });
  return { sessionIds: sessions.map((s) => s.id) };
}

/** Result files for one session's runs, so reading its history has something to page. */
export async function seedResults(dir: string, sessionId: string, runsPerSession: number): Promise<void> {
  await mkdir(join(dir, 'results'), { recursive: true, mode: 0o700 });
  for (let seq = 1; seq <= runsPerSession; seq++) {
    const runId = `${sessionId}-r${seq}`;
    const result: RunResultFile = {
      runId,
      finalText: `Turn ${seq} done.`,
      transcript: [
        {
          kind: 'tool',
          toolUseId: `call_${seq}`,
          name: 'Read',
          input: '{"file_path":"src/parser.ts"}',
          status: 'done',
          isError: false,
          result: 'export function parse() {}',
        },
        { kind: 'assistant', text: `Turn ${seq} done.` },
      ],
      permissionsApproved: [],
      diagnostics: [],
      stderrTail: '',
    };
    await writeFileAtomic(join(dir, 'results', `${runId}.json`), JSON.stringify(result));
  }
}

export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
