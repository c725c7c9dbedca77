/**
 * A droid started outside any turn (the catalog read, doctor's catalog
 * check, verify-route): confined like a turn when the sandbox is on, in its
 * own process group, and that group killed, with everything droid started,
 * when the work is done. `droid.list_models` starts the stdio MCP servers of
 * `~/.factory/mcp.json` (measured): whatever droid's home says runs here,
 * so it runs with no more rights than a read-only turn.
 */
import { mkdtempSync } from 'node:fs';
import { niced } from '../../util/nice.js';
import { removeTree } from '../../util/remove-tree.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DroidClient, SHUTDOWN_BUDGET } from '../../droid/client.js';
import { killGroupAndWait } from './process-group.js';
import { networkOf, sandboxLauncher, type SandboxSpec } from '../../sandbox/sandbox.js';
import { attachEgress, egressEntries, type TurnEgress } from '../../sandbox/egress/turn-egress.js';
import { factoryDirOf } from '../../shared/host-paths.js';
import { confinedEnv } from '../../sandbox/bwrap-args.js';
import { prepareTurnPaths, runtimeDirOf, turnReads } from '../../sandbox/turn-paths.js';

export interface ShortLivedDroidOptions {
  droidPath: string;
  env: Readonly<Record<string, string>>;
  sandbox: SandboxSpec;
  /**
   * A private folder droid sees as its sessions folder (verify-route opens and
   * resumes sessions there, then drops it); absent: droid's real one, read-only.
   */
  sessionsCopy?: string;
  /** A folder droid may read (a session's cwd); it is never writable. */
  cwd?: string;
  requestTimeoutMs?: number;
  /**
   * Runs droid, and the sandbox around it, at this CPU niceness through
   * nice(1) when the host has it: a read nobody waits for yields the CPU to
   * turns. Absent: the controller's own priority.
   */
  niceness?: number;
  /** Endpoints droid must reach besides the model endpoints (verify-route's Amp URL); the operator's list does not apply here. */
  allowUrls?: readonly string[];
}

/** Runs `use` against a fresh droid and stops its whole process group afterwards. */
export async function withShortLivedDroid<T>(options: ShortLivedDroidOptions, use: (client: DroidClient) => Promise<T>): Promise<T> {
  let dispose: () => Promise<unknown> = async () => null;
  let client: DroidClient;
  const common = {
    droidPath: options.droidPath,
    detached: true,
    ...(options.requestTimeoutMs !== undefined && { requestTimeoutMs: options.requestTimeoutMs }),
  };
  if (options.sandbox.mode === 'bwrap') {
    const factoryDir = factoryDirOf(options.env);
    const paths = prepareTurnPaths(factoryDir, options.droidPath);
    dispose = paths.dispose;
    try {
      const launcher = sandboxLauncher(options.sandbox.bwrapPath, {
        workspace: options.cwd ? { path: options.cwd, writable: false } : null,
        factoryDir,
        factoryEntries: paths.factoryEntries,
        // Nothing of it persists but verify-route's own private sessions folder.
        sessionsCopy: options.sessionsCopy ?? null,
        turnTmp: paths.turnTmp,
        runtimeDir: runtimeDirOf(options.env),
        hiddenDirs: options.sandbox.hiddenDirs,
        hiddenFiles: options.sandbox.hiddenFiles,
        ...turnReads(options.sandbox.reads, options.droidPath, options.cwd ?? null),
        network: networkOf(options.sandbox),
      });
      client = DroidClient.spawn({
        ...common,
        env: confinedEnv(options.env),
        cwd: options.cwd ?? paths.turnTmp,
        launcher: options.niceness === undefined ? launcher : niced(launcher, options.niceness),
      });
    } catch (err) {
      await dispose();
      throw err;
    }
  } else {
    const cwd = options.cwd ?? mkdtempSync(join(tmpdir(), 'droid-mcp-droid-'));
    if (!options.cwd) dispose = () => removeTree(cwd);
    const launcher = options.niceness === undefined ? undefined : niced(undefined, options.niceness);
    client = DroidClient.spawn({ ...common, env: options.env, cwd, ...(launcher && { launcher }) });
  }
  const pgid = client.process.child.pid ?? -1;
  let egress: TurnEgress | undefined;
  const listener = client.process.egressListener;
  if (listener) {
    // What it reads needs only the model endpoints (the catalog, verify-route's checks): never the operator's list.
    egress = attachEgress(listener, egressEntries({ allow: [], modelOnly: true }, factoryDirOf(options.env), options.allowUrls ?? []));
  }
  try {
    await egress?.ready;
    return await use(client);
  } finally {
    egress?.close();
    await client.shutdown(SHUTDOWN_BUDGET);
    // MCP servers droid started (and anything they started) go with the group.
    await killGroupAndWait(pgid);
    // A planted MCP server could have shaped its TMPDIR to resist removal: never a throw from here.
    await dispose();
  }
}
