/**
 * Where the controller's secrets may live. A turn writes its workspace (at
 * or below an approved root), its private TMPDIR (below the system temp
 * folder) and its session's files in droid's home; the state directory and
 * the token file are hidden from it by mounts, but a writer turn that
 * renames a parent folder moves the hiding mount with it and can plant its
 * own state or token at the configured path (measured). So neither may sit
 * at, above or below an approved root, nor in droid's home, nor hold the
 * temp folder. And no approved root may hold droid's home or the temp
 * folder, or lie inside droid's home: a writer turn there could write
 * droid's settings (or rename its home away) and other turns' TMPDIRs. Nor
 * may one hold what the controller runs unconfined (unconfined-programs.ts).
 * Pure: the caller resolves every path first.
 */
import { isAtOrBelow, overlaps } from '../util/paths.js';

export interface Reach {
  /** Canonical approved roots. */
  approvedRoots: readonly string[];
  /** droid's own `.factory` folder, resolved. */
  factoryDir: string;
  /** The system temp folder, resolved. */
  tmpDir: string;
  /** The sandbox's private temp root below it (turn TMPDIRs, sessions copies), resolved. */
  privateTmpRoot: string;
  /** Symlinks in droid's home (but its scratch and sessions) and where they resolve. */
  factoryLinks: ReadonlyArray<{ path: string; target: string }>;
}

export interface PlacementProblem {
  key: 'stateDirectory' | 'tokenFile' | 'approvedDirectories';
  message: string;
}

export function placementProblems(paths: { stateDirectory: string; tokenFile?: string | undefined }, reach: Reach): PlacementProblem[] {
  const problems: PlacementProblem[] = [];
  for (const root of reach.approvedRoots) {
    if (overlaps(root, reach.factoryDir)) {
      problems.push({
        key: 'approvedDirectories',
        message: `${root} is ${relation(root, reach.factoryDir)} droid's home ${reach.factoryDir}: a writer turn there could change what every later droid runs. Approve project folders only, none holding droid's home`,
      });
    }
    if (isAtOrBelow(reach.tmpDir, root)) {
      problems.push({
        key: 'approvedDirectories',
        message: `${root} holds the system temp folder ${reach.tmpDir}, where every turn's TMPDIR lives: a writer turn there could write other turns' files. Approve project folders only`,
      });
    } else if (overlaps(root, reach.privateTmpRoot)) {
      problems.push({
        key: 'approvedDirectories',
        message: `${root} is ${relation(root, reach.privateTmpRoot)} the sandbox's private temp folder ${reach.privateTmpRoot}, where every turn's TMPDIR and sessions copy live. Approve project folders only`,
      });
    }
    // droid's home is read-only to a turn, but not what its links point at.
    for (const link of reach.factoryLinks) {
      if (isAtOrBelow(link.target, root)) {
        problems.push({
          key: 'approvedDirectories',
          message: `droid's home entry ${link.path} links to ${link.target}, inside the approved root ${root}: a writer turn there could change what every later droid runs. Replace the link with a copy, or approve another root`,
        });
      }
    }
  }
  const move = "Move it outside every approved root and outside droid's home (e.g. /var/lib/droid-mcp/state, /etc/droid-mcp/token), then start again";
  const state = paths.stateDirectory;
  for (const root of reach.approvedRoots) {
    if (overlaps(state, root))
      problems.push({
        key: 'stateDirectory',
        message: `${state} is ${relation(state, root)} the approved root ${root}, where a writer turn can rename its way to it. ${move}`,
      });
  }
  if (overlaps(state, reach.factoryDir))
    problems.push({
      key: 'stateDirectory',
      message: `${state} is ${relation(state, reach.factoryDir)} droid's home ${reach.factoryDir}, which turns write. ${move}`,
    });
  if (isAtOrBelow(reach.tmpDir, state))
    problems.push({ key: 'stateDirectory', message: `${state} holds the system temp folder ${reach.tmpDir}, where every turn's TMPDIR lives. ${move}` });
  const token = paths.tokenFile;
  if (token !== undefined) {
    for (const root of reach.approvedRoots) {
      if (isAtOrBelow(token, root))
        problems.push({ key: 'tokenFile', message: `${token} is inside the approved root ${root}, where a writer turn can rename its way to it. ${move}` });
    }
    if (isAtOrBelow(token, reach.factoryDir))
      problems.push({ key: 'tokenFile', message: `${token} is inside droid's home ${reach.factoryDir}, which turns write. ${move}` });
  }
  return problems;
}

/**
 * The first approved root that holds a place one of `programs` passes
 * through (unconfined-programs.ts `pathLocations`), as a refusal.
 */
export function unconfinedProblem(
  approvedRoots: readonly string[],
  programs: ReadonlyArray<{ what: string; path: string; locations: readonly string[] }>,
): PlacementProblem | null {
  for (const root of approvedRoots) {
    for (const program of programs) {
      const inside = program.locations.find((location) => isAtOrBelow(location, root));
      if (inside === undefined) continue;
      const via = inside === program.path ? '' : ` (through ${inside})`;
      return {
        key: 'approvedDirectories',
        message: `${root} holds ${program.what} ${program.path}${via}, which runs outside the sandbox: a writer turn there could rewrite it and have its own code run unconfined. Approve project folders only, or move ${program.what} out of ${root}`,
      };
    }
  }
  return null;
}

function relation(path: string, dir: string): string {
  if (path === dir) return 'the same folder as';
  return isAtOrBelow(path, dir) ? 'inside' : 'above';
}
