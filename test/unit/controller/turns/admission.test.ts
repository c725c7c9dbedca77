import { describe, expect, it } from 'vitest';
import { selectRunnable, type LockClaim, type QueuedTurn } from '../../../../src/controller/turns/admission.js';

const q = (runId: string, sessionId: string, workspace: string, writer: boolean): QueuedTurn => ({ runId, sessionId, workspace, writer });
const live = (sessionId: string, workspace: string, writer: boolean): LockClaim => ({ sessionId, workspace, writer });

describe('selectRunnable', () => {
  it('respects capacity in FIFO order', () => {
    const queue = [q('a', 's1', '/r/a', true), q('b', 's2', '/r/b', true), q('c', 's3', '/r/c', true)];
    expect(selectRunnable(queue, [], 2)).toEqual(['a', 'b']);
    expect(selectRunnable(queue, [live('s9', '/x', true)], 2)).toEqual(['a']);
  });

  it('runs at most one turn per session, in order', () => {
    const queue = [q('a', 's1', '/r/a', false), q('b', 's1', '/r/a', false)];
    expect(selectRunnable(queue, [], 4)).toEqual(['a']);
    expect(selectRunnable(queue, [live('s1', '/r/a', false)], 4)).toEqual([]);
  });

  it('a lock held by no turn (a checkout being removed) blocks overlapping turns, readers too, and takes no slot', () => {
    const queue = [q('a', 's1', '/c/s9/sub', false), q('b', 's2', '/r', true)];
    expect(selectRunnable(queue, [], 1, [live('s9', '/c/s9', true)])).toEqual(['b']);
  });

  it('lets readers share overlapping trees', () => {
    const queue = [q('a', 's1', '/r', false), q('b', 's2', '/r/sub', false)];
    expect(selectRunnable(queue, [live('s3', '/r/sub/deeper', false)], 4)).toEqual(['a', 'b']);
  });

  it('gives a writer its whole tree: ancestors and descendants both ways', () => {
    expect(selectRunnable([q('a', 's1', '/r/sub', true)], [live('s2', '/r', false)], 4)).toEqual([]);
    expect(selectRunnable([q('a', 's1', '/r', true)], [live('s2', '/r/sub', false)], 4)).toEqual([]);
    expect(selectRunnable([q('a', 's1', '/r', false)], [live('s2', '/r/sub', true)], 4)).toEqual([]);
  });

  it('runs writers on sibling trees in parallel, and sibling prefixes are not nested', () => {
    const queue = [q('a', 's1', '/r/one', true), q('b', 's2', '/r/two', true), q('c', 's3', '/r/one-more', true)];
    expect(selectRunnable(queue, [], 4)).toEqual(['a', 'b', 'c']);
  });

  it('never lets later readers overtake a waiting writer', () => {
    const queue = [q('w', 's1', '/r', true), q('r2', 's3', '/r/sub', false)];
    // A reader holds /r; the writer waits; a later reader must wait behind it.
    expect(selectRunnable(queue, [live('s2', '/r', false)], 4)).toEqual([]);
  });

  it('lets unrelated work pass a blocked turn', () => {
    const queue = [q('w', 's1', '/r', true), q('x', 's2', '/elsewhere', true)];
    expect(selectRunnable(queue, [live('s3', '/r/sub', false)], 4)).toEqual(['x']);
  });

  it("a fork's first turn takes its source's turn too: behind the source's live or earlier turns, ahead of its later ones (issue 40)", () => {
    const fork = (runId: string): QueuedTurn => ({ runId, sessionId: 'f', workspace: '/r/f', writer: true, forkOf: 's1' });
    // Behind the source's live turn, though the workspaces do not overlap.
    expect(selectRunnable([fork('f1')], [live('s1', '/r/a', true)], 4)).toEqual([]);
    // Behind the source's earlier queued turn, and the source's later turn behind it.
    expect(selectRunnable([q('a', 's1', '/r/a', true), fork('f1'), q('b', 's1', '/r/a', true)], [], 4)).toEqual(['a']);
    expect(selectRunnable([fork('f1'), q('b', 's1', '/r/a', true)], [], 4)).toEqual(['f1']);
    // Forks of one source run side by side.
    expect(selectRunnable([fork('f1'), { ...fork('f2'), sessionId: 'g', workspace: '/r/g' }], [], 4)).toEqual(['f1', 'f2']);
    // A live fork's first turn keeps the source's next turn waiting; another session runs.
    expect(selectRunnable([q('b', 's1', '/r/a', true), q('c', 's2', '/r/c', true)], [{ ...live('f', '/r/f', true), forkOf: 's1' }], 4)).toEqual(['c']);
  });
});
