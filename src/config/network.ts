/**
 * The network and read settings of sandboxed turns (issue 37), resolved:
 * `network` with its defaults, and `sandboxReadable` refused where it would
 * undo a cover (a whole home, an approved root, `/`) or show what the
 * sandbox decides itself (the state directory, the token file, droid's home,
 * the private temp root). Pure but `reachOf`, which reads where the homes are.
 */
import { homedir, tmpdir, userInfo } from 'node:os';
import { normalize } from 'node:path';
import { currentUid, factoryDirOf, privateTmpRootIn } from '../shared/host-paths.js';
import { overlaps, isAtOrBelow } from '../util/paths.js';
import type { Config, ConfigFile } from './schema.js';

export function networkConfigOf(file: ConfigFile): Config['network'] {
  return { mode: file.network?.mode ?? 'proxy', allow: [...new Set(file.network?.allow ?? [])] };
}

interface ReadableReach {
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
    const secret = reach.secrets.find((s) => overlaps(s, path));
    if (secret)
      return `lists ${JSON.stringify(raw)}, which overlaps ${secret} (droid-mcp's state or token, droid's home, or the sandbox's private folders, each shown to a turn only as the sandbox decides): remove it`;
    if (!out.includes(path)) out.push(path);
  }
  return out;
}

/** Where the loader found things: the service user's home, droid's home, the roots and secrets. */
export interface LoadedPlaces {
  home?: string | undefined;
  factoryDir?: string | undefined;
  approvedDirectories: readonly string[];
  stateDirectory: string;
  tokenFile?: string | undefined;
}

/**
 * `network` with its defaults, and `sandboxReadable` checked against the
 * homes a sandbox covers (this one's and the account's, as sandbox.ts does)
 * and what it decides itself; `refuse` makes the error a problem throws.
 */
export function reachOf(file: ConfigFile, refuse: (problem: string) => Error, places: LoadedPlaces): Pick<Config, 'network' | 'sandboxReadable'> {
  const home = places.home || process.env.HOME || homedir();
  const factoryDir = places.factoryDir ?? factoryDirOf({ FACTORY_HOME_OVERRIDE: process.env.FACTORY_HOME_OVERRIDE, HOME: home });
  const reach: ReadableReach = {
    homes: [home, userInfo().homedir],
    approvedRoots: places.approvedDirectories,
    secrets: [places.stateDirectory, ...(places.tokenFile ? [places.tokenFile] : []), factoryDir, privateTmpRootIn(tmpdir(), currentUid())],
  };
  const readable = readableOf(file, reach);
  if (typeof readable === 'string') throw refuse(readable);
  return { network: networkConfigOf(file), sandboxReadable: readable };
}
