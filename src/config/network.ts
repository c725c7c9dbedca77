/**
 * The network and read settings of sandboxed turns (issue 37), resolved:
 * `network` with its defaults, and `sandboxReadable` refused where it would
 * undo a cover (a whole home, an approved root, `/`) or show a secret (the
 * state directory, the token file). Pure.
 */
import { normalize } from 'node:path';
import { overlaps, isAtOrBelow } from '../util/paths.js';
import type { Config, ConfigFile } from './schema.js';

export function networkOf(file: ConfigFile): Config['network'] {
  return { mode: file.network?.mode ?? 'proxy', allow: [...new Set(file.network?.allow ?? [])] };
}

export interface ReadableReach {
  homes: readonly string[];
  approvedRoots: readonly string[];
  secrets: readonly string[];
}

/** The list, normalized and deduplicated, or the first problem: a message for the `sandboxReadable` key. */
function readableOf(file: ConfigFile, reach: ReadableReach): string[] | string {
  const out: string[] = [];
  for (const raw of file.sandboxReadable ?? []) {
    const path = normalize(raw).replace(/(.)\/$/, '$1');
    if (path === '/') return 'lists "/", which would show the whole host again; list the files or folders turns need (e.g. "/home/svc/.pyenv")';
    const home = reach.homes.find((h) => isAtOrBelow(h, path));
    if (home) return `lists ${JSON.stringify(raw)}, which holds the home ${home}: that would show every secret in it. List the files or folders turns need`;
    const root = reach.approvedRoots.find((r) => overlaps(r, path));
    if (root) return `lists ${JSON.stringify(raw)}, which overlaps the approved root ${root}: a turn sees its own workspace, never another's. Remove it`;
    const secret = reach.secrets.find((s) => isAtOrBelow(s, path));
    if (secret) return `lists ${JSON.stringify(raw)}, which holds ${secret} (droid-mcp's state or token): remove it`;
    if (!out.includes(path)) out.push(path);
  }
  return out;
}

/** `network` with its defaults, and `sandboxReadable` checked; `refuse` makes the error a problem throws. */
export function reachOf(file: ConfigFile, refuse: (problem: string) => Error, reach: ReadableReach): Pick<Config, 'network' | 'sandboxReadable'> {
  const readable = readableOf(file, reach);
  if (typeof readable === 'string') throw refuse(readable);
  return { network: networkOf(file), sandboxReadable: readable };
}
