/**
 * Waiting for sessions to settle, and the change feed behind it: every
 * change of any session is announced here, and waits and progress listeners
 * are answered from the reader's cache, never by reading records back.
 */
import { EventEmitter } from 'node:events';
import { ControllerError } from '../../shared/public-error.js';
import type { Log } from '../../util/logger.js';
import type { SessionReader } from './session-reader.js';
import type { SessionView } from './views.js';

const MAX_WAIT_SESSIONS = 10;

export class SessionWaits {
  private readonly changes = new EventEmitter();

  constructor(
    private readonly reader: SessionReader,
    private readonly log: Log,
  ) {
    this.changes.setMaxListeners(0);
  }

  /** Announces a change of some session to every wait and listener. */
  changed(): void {
    this.changes.emit('change');
  }

  /** Calls `listener` after every change of any session; returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.changes.on('change', listener);
    return () => this.changes.off('change', listener);
  }

  async waitFor(ids: readonly string[], timeoutSeconds: number, signal?: AbortSignal): Promise<{ sessions: SessionView[]; timedOut: boolean }> {
    const unique = [...new Set(ids)];
    if (unique.length === 0 || unique.length > MAX_WAIT_SESSIONS) {
      throw new ControllerError(
        'invalid_arguments',
        `wait takes 1 to ${MAX_WAIT_SESSIONS} distinct sessions`,
        `Pass between 1 and ${MAX_WAIT_SESSIONS} session handles.`,
      );
    }
    for (const id of unique) this.reader.session(id);
    // Runs change state only through commits, so progress events are answered from the cache.
    const settled = () => unique.every((id) => this.reader.agentState(id) !== 'working');
    if (!settled() && timeoutSeconds > 0) {
      const began = Date.now();
      this.log.info({ sessions: unique, timeoutSeconds }, 'waiting for sessions');
      await new Promise<void>((resolve, reject) => {
        const finish = () => {
          clearTimeout(timer);
          this.changes.off('change', check);
          signal?.removeEventListener('abort', abort);
          this.log.info({ sessions: unique, waitedMs: Date.now() - began, settled: settled() }, 'wait ended');
        };
        const check = () => {
          if (!settled()) return;
          finish();
          resolve();
        };
        // A client that cancels its request stops the wait at once.
        const abort = () => {
          finish();
          reject(new ControllerError('request_cancelled', 'the client cancelled this wait', 'Nothing to do; call again to keep waiting.', true));
        };
        const timer = setTimeout(() => {
          finish();
          resolve();
        }, timeoutSeconds * 1000);
        this.changes.on('change', check);
        if (signal?.aborted) abort();
        else signal?.addEventListener('abort', abort, { once: true });
      });
    }
    return { sessions: unique.map((id) => this.reader.status(id)), timedOut: !settled() };
  }
}
