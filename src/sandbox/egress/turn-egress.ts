/**
 * One droid's egress, owned by whoever started that droid (a turn's worker,
 * or the process running a short-lived droid): the allowlist as it stands
 * when droid starts, the proxy on the listener the sandbox hands out, and
 * what it refused. `close` ends the proxy and every connection through it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EgressListener } from '../../droid/start-droid.js';
import { DroidError } from '../../droid/errors.js';
import type { EgressEvidence } from '../../shared/evidence-types.js';
import { entryOfUrl, factoryEntries, modelEntries, parseAllowEntry, type AllowEntry } from '../../shared/egress-policy.js';
import { startEgressProxy, type EgressProxy } from './proxy.js';

/** How long droid's start waits for its proxy's listener (it came ≈ 55 ms after the spawn here, beside droid's own start). */
const LISTENER_WAIT_MS = 10_000;

/** The operator's egress settings as a sandbox spec carries them. */
export interface EgressPolicySpec {
  /** config `network.allow`, as written (validated at load). */
  allow: string[];
  /** The session asked for model-only: the operator's list does not apply. */
  modelOnly?: boolean;
}

/**
 * Everything this droid may reach: Factory's hosts, the custom models in
 * droid's settings (read now, so a model the operator added since start-up
 * works), a routed turn's Amp endpoint, and the operator's list.
 */
export function egressEntries(policy: EgressPolicySpec, factoryDir: string, extraUrls: readonly string[] = []): AllowEntry[] {
  const entries = [...factoryEntries(), ...modelEntries(readSettings(join(factoryDir, 'settings.json')))];
  for (const url of extraUrls) {
    const entry = entryOfUrl(url, 'reply-back');
    if (entry) entries.push(entry);
  }
  if (!policy.modelOnly) {
    for (const text of policy.allow) {
      const entry = parseAllowEntry(text);
      if (typeof entry !== 'string') entries.push(entry);
    }
  }
  return entries;
}

function readSettings(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch {
    // No settings, or unreadable ones: droid then has no custom model either.
    return null;
  }
}

export interface TurnEgress {
  /** Resolves once the proxy listens; rejects `sandbox_unavailable` when the listener never came. */
  readonly ready: Promise<void>;
  report(): EgressEvidence;
  close(): void;
}

export function attachEgress(listener: Promise<EgressListener>, entries: readonly AllowEntry[]): TurnEgress {
  let proxy: EgressProxy | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`it did not arrive within ${LISTENER_WAIT_MS} ms`)), LISTENER_WAIT_MS);
  });
  const ready = Promise.race([listener, timeout]).then(
    ({ server, take }) => {
      clearTimeout(timer);
      const held = take();
      if (closed) {
        server.close();
        for (const socket of held) socket.destroy();
        return;
      }
      proxy = startEgressProxy(server, { entries });
      // What droid sent before the proxy was here is served now, in order.
      for (const socket of held) server.emit('connection', socket);
    },
    (err: unknown) => {
      clearTimeout(timer);
      throw new DroidError('sandbox_unavailable', `droid's network proxy could not start (${(err as Error).message}); nothing was submitted`, true);
    },
  );
  ready.catch(() => undefined);
  return {
    ready,
    report: () => {
      const r = proxy?.refusals() ?? { refused: [], othersRefused: 0 };
      return { refused: r.refused.map((x) => ({ ...x, firstAt: new Date(x.firstAt).toISOString() })), othersRefused: r.othersRefused };
    },
    close: () => {
      closed = true;
      clearTimeout(timer);
      proxy?.close();
      void listener.then(
        ({ server, take }) => {
          server.close();
          for (const socket of take()) socket.destroy();
        },
        () => undefined,
      );
    },
  };
}
