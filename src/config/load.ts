import { constants } from 'node:fs';
import { access, readdir, realpath, stat } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, normalize } from 'node:path';
import { AUTONOMY_LEVELS } from '../droid/permission-policy.js';
import { currentUid, factoryDirOf, FACTORY_UNBOUND, privateTmpRootIn } from '../shared/host-paths.js';
import { placementProblems } from './placement.js';
import { ownPrograms, unconfinedIn, type UnconfinedProgram } from './unconfined-programs.js';
import { checkWorktrees } from './worktrees.js';
import { reachOf } from './network.js';
import { ConfigError, invalid } from './errors.js';
import { fromIssues, readConfigJson } from './read-config.js';
import { errCode, sharedMode } from '../util/errno.js';
import { AMP_MCP_URL, CONFIG_DEFAULTS, autonomyAtMost, configFileSchema, type Config, type ConfigFile } from './schema.js';

/** Host facts, injectable so tests do not depend on the machine running them. */
export interface LoadConfigEnv {
  platform?: NodeJS.Platform;
  home?: string;
  /** `PATH`-style list searched for `droid` when `droidPath` is not set. */
  pathEnv?: string;
  /** droid's `.factory` folder (default: from FACTORY_HOME_OVERRIDE, else HOME). */
  factoryDir?: string;
  /** droid-mcp's install and the Node executable (default: this process's own; unconfined-programs.ts). */
  installDir?: string;
  nodePath?: string;
}

const INSTALL_HINT =
  'Install the Factory droid CLI as the service user (curl -fsSL https://app.factory.ai/cli | sh) or set "droidPath" to the absolute path of its executable.';

/**
 * Reads, validates and resolves the controller config at startup. Every
 * refusal is a ConfigError naming the key to fix and how.
 */
export async function loadConfig(configPath: string, env: LoadConfigEnv = {}): Promise<Config> {
  const platform = env.platform ?? process.platform;
  // Run cleanup relies on POSIX process groups.
  if (platform !== 'linux' && platform !== 'darwin') {
    throw new ConfigError(
      'config_invalid',
      `Unsupported platform "${platform}": droid-mcp needs Linux or macOS (process-group cleanup). Run the controller on a Linux or macOS host.`,
      'platform',
    );
  }

  const raw = await readConfigJson(configPath);
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success) throw fromIssues(configPath, parsed.error.issues);
  const file = parsed.data;

  const { maxAutonomy, defaultAutonomy, warmPoolSize } = checkCrossKeys(configPath, file);
  const approvedDirectories = await resolveApprovedDirectories(configPath, file.approvedDirectories);
  const stateDirectory = normalize(file.stateDirectory);
  await checkStateDirectory(configPath, stateDirectory);
  const tokenFile = file.tokenFile !== undefined ? normalize(file.tokenFile) : undefined;
  await checkPlacement(configPath, { stateDirectory, tokenFile }, approvedDirectories, env);
  const { droidPath, sandbox } = await resolveLaunched(configPath, file, platform, env, approvedDirectories);
  return {
    approvedDirectories,
    stateDirectory,
    droidPath,
    transport: file.transport,
    maxAutonomy,
    defaultAutonomy,
    ...(file.defaultModel !== undefined && { defaultModel: file.defaultModel }),
    ...(file.reasoningEffort !== undefined && { reasoningEffort: file.reasoningEffort }),
    excludeModelIds: [...new Set(file.excludeModelIds)],
    maxConcurrentRuns: file.maxConcurrentRuns,
    warmPoolSize,
    runTimeoutMs: file.runTimeoutMs,
    cancelGraceMs: file.cancelGraceMs,
    ceilings: ceilingsOf(file),
    ...(file.autoCompactAt !== undefined && { autoCompactAt: file.autoCompactAt }),
    modelCacheTtlMs: file.modelCacheTtlMs,
    port: file.port,
    ...(tokenFile !== undefined && { tokenFile }),
    ...(file.publicUrl !== undefined && { publicUrl: file.publicUrl }),
    ...(file.ampMcp !== undefined && { ampMcp: { url: file.ampMcp.url ?? AMP_MCP_URL } }),
    ...{ sandbox, ...(await resolveWorktrees(configPath, file, approvedDirectories)) },
    ...reachOf(file, (problem) => invalid(configPath, 'sandboxReadable', problem), {
      home: env.home,
      factoryDir: env.factoryDir,
      approvedDirectories,
      stateDirectory,
      tokenFile,
    }),
  };
}

/** The spend ceilings; an absent key is none. */
/** The rules between keys that the schema checks one by one. */
function checkCrossKeys(
  configPath: string,
  file: ConfigFile,
): { maxAutonomy: Config['maxAutonomy']; defaultAutonomy: Config['defaultAutonomy']; warmPoolSize: number } {
  const maxAutonomy = file.maxAutonomy;
  const defaultAutonomy = file.defaultAutonomy ?? maxAutonomy;
  if (!autonomyAtMost(defaultAutonomy, maxAutonomy)) {
    throw invalid(
      configPath,
      'defaultAutonomy',
      `"${defaultAutonomy}" is above maxAutonomy "${maxAutonomy}" (order ${AUTONOMY_LEVELS.join(' < ')}); lower defaultAutonomy, raise maxAutonomy, or omit defaultAutonomy to inherit the ceiling`,
    );
  }
  if (file.transport === 'http' && file.tokenFile === undefined) {
    throw invalid(
      configPath,
      'tokenFile',
      'is required when transport is "http": set it to the absolute path of a private (chmod 600) file holding the bearer token (at least 32 URL-safe random characters)',
    );
  }
  if (file.defaultModel !== undefined && file.excludeModelIds.includes(file.defaultModel)) {
    // Every create that omits `model` would otherwise be refused at launch.
    throw invalid(
      configPath,
      'defaultModel',
      `"${file.defaultModel}" is also listed in excludeModelIds; choose a different defaultModel or remove it from excludeModelIds`,
    );
  }

  // Default 1, but never above the number of turns that can run at once.
  const warmPoolSize = file.warmPoolSize ?? Math.min(CONFIG_DEFAULTS.warmPoolSize, file.maxConcurrentRuns);
  if (warmPoolSize > file.maxConcurrentRuns) {
    throw invalid(
      configPath,
      'warmPoolSize',
      `is ${warmPoolSize}, above maxConcurrentRuns ${file.maxConcurrentRuns}: more warm workers than turns that can run at once only cost memory. Lower warmPoolSize (0 disables the pool) or raise maxConcurrentRuns`,
    );
  }
  return { maxAutonomy, defaultAutonomy, warmPoolSize };
}

function ceilingsOf(file: ConfigFile): Config['ceilings'] {
  return { maxTurnTokens: file.maxTurnTokens ?? null, maxTurnCredits: file.maxTurnCredits ?? null, maxSessionCredits: file.maxSessionCredits ?? null };
}

/** `worktrees`, when set: its directory checked (config/worktrees.ts). */
async function resolveWorktrees(configPath: string, file: ConfigFile, approvedDirectories: readonly string[]): Promise<Pick<Config, 'worktrees'>> {
  if (file.worktrees === undefined) return {};
  const worktrees = await checkWorktrees(file.worktrees, approvedDirectories);
  if (typeof worktrees === 'string') throw invalid(configPath, 'worktrees.directory', worktrees);
  return { worktrees };
}

/** A path resolved as far as it exists (a state directory may not exist yet), the rest appended. */
async function resolveExisting(path: string): Promise<string> {
  const missing: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    const real = await realpath(dir).catch(() => null);
    if (real !== null) return join(real, ...missing.reverse());
    if (dirname(dir) === dir) return path;
    missing.push(basename(dir));
  }
}

const LINK_WALK_LIMIT = 20_000;

/** Every symlink in droid's home (but the entries no sandbox shows, FACTORY_UNBOUND: a turn's droid follows none of their links), resolved; a bounded walk that follows none of them. */
async function linksIn(factoryDir: string): Promise<Array<{ path: string; target: string }>> {
  const links: Array<{ path: string; target: string }> = [];
  let seen = 0;
  const walk = async (dir: string, top: boolean): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (++seen > LINK_WALK_LIMIT || (top && FACTORY_UNBOUND.includes(entry.name))) continue;
      const path = join(dir, entry.name);
      if (entry.isSymbolicLink()) {
        const target = await realpath(path).catch(() => null);
        if (target !== null) links.push({ path, target });
      } else if (entry.isDirectory()) await walk(path, false);
    }
  };
  await walk(factoryDir, true);
  return links;
}

/** The state directory and the token file never where a turn writes (placement.ts), nor a root over droid-mcp, Node or PATH. */
async function checkPlacement(
  configPath: string,
  paths: { stateDirectory: string; tokenFile?: string | undefined },
  approvedRoots: readonly string[],
  env: LoadConfigEnv,
): Promise<void> {
  const factoryDir = env.factoryDir ?? factoryDirOf({ FACTORY_HOME_OVERRIDE: process.env.FACTORY_HOME_OVERRIDE, HOME: env.home || process.env.HOME });
  const resolved = {
    stateDirectory: await resolveExisting(paths.stateDirectory),
    ...(paths.tokenFile !== undefined && { tokenFile: await resolveExisting(paths.tokenFile) }),
  };
  const resolvedFactory = await resolveExisting(factoryDir);
  const tmpDir = await resolveExisting(tmpdir());
  const reach = {
    approvedRoots,
    factoryDir: resolvedFactory,
    tmpDir,
    privateTmpRoot: privateTmpRootIn(tmpDir, currentUid()),
    factoryLinks: await linksIn(resolvedFactory),
  };
  const problem = placementProblems(resolved, reach)[0];
  if (problem) throw invalid(configPath, problem.key, problem.message);
  // A program planted in a PATH entry runs wherever the controller or its commands call it by name.
  const onPath = pathDirs(env).map((dir) => ({ what: 'the PATH entry', path: dir }));
  await checkUnconfined(configPath, approvedRoots, [...ownPrograms({ install: env.installDir, node: env.nodePath }), ...onPath]);
}

/** droid, and bwrap when turns run in it, neither in an approved root. */
async function resolveLaunched(
  configPath: string,
  file: ConfigFile,
  platform: NodeJS.Platform,
  env: LoadConfigEnv,
  approvedRoots: readonly string[],
): Promise<Pick<Config, 'droidPath' | 'sandbox'>> {
  const droidPath = await resolveDroid(file, env);
  const sandbox = await resolveSandbox(configPath, file, platform, env);
  const bwrap = sandbox.mode === 'bwrap' ? sandbox.bwrapPath : null;
  const launched = [{ what: 'the droid executable', path: droidPath }, ...(bwrap === null ? [] : [{ what: 'the bwrap executable', path: bwrap }])];
  await checkUnconfined(configPath, approvedRoots, launched);
  return { droidPath, sandbox };
}

async function checkUnconfined(configPath: string, approvedRoots: readonly string[], programs: readonly UnconfinedProgram[]): Promise<void> {
  const problem = await unconfinedIn(approvedRoots, programs);
  if (problem) throw invalid(configPath, problem.key, problem.message);
}

/**
 * `bwrap` is the default on Linux. A bwrap that is not found is not a
 * start-up refusal: the trial run reports it and every turn fails
 * sandbox_unavailable, so the operator sees it without losing the service.
 * macOS has no bubblewrap; its sandbox-exec equivalent is not implemented,
 * so there the operator must choose "off" explicitly.
 */
async function resolveSandbox(configPath: string, file: ConfigFile, platform: NodeJS.Platform, env: LoadConfigEnv): Promise<Config['sandbox']> {
  const mode = file.sandbox ?? (platform === 'linux' ? 'bwrap' : undefined);
  if (mode === undefined || (mode === 'bwrap' && platform !== 'linux')) {
    throw invalid(
      configPath,
      'sandbox',
      `"bwrap" (bubblewrap) exists only on Linux and no sandbox is implemented for ${platform}; set "sandbox": "off" to run turns unconfined (autonomy levels are not a security boundary)`,
    );
  }
  if (mode === 'off') {
    if (file.bwrapPath !== undefined) throw invalid(configPath, 'bwrapPath', 'is set but "sandbox" is "off"; remove bwrapPath or set "sandbox": "bwrap"');
    return { mode: 'off' };
  }
  if (file.bwrapPath !== undefined) return { mode: 'bwrap', bwrapPath: normalize(file.bwrapPath) };
  for (const candidate of pathCandidates(env, 'bwrap')) {
    if (await isExecutableFile(candidate)) return { mode: 'bwrap', bwrapPath: candidate };
  }
  return { mode: 'bwrap', bwrapPath: null };
}

/** The absolute PATH entries (relative ones would depend on the controller's cwd). */
function pathDirs(env: LoadConfigEnv): string[] {
  return (env.pathEnv ?? process.env.PATH ?? '').split(':').filter((dir) => dir !== '' && isAbsolute(dir));
}

/** Absolute PATH entries joined with `name`. */
function pathCandidates(env: LoadConfigEnv, name: string): string[] {
  return pathDirs(env).map((dir) => join(dir, name));
}

async function resolveApprovedDirectories(configPath: string, dirs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const [i, dir] of dirs.entries()) {
    const key = `approvedDirectories[${i}]`;
    let real: string;
    try {
      // Canonical roots make later containment checks compare real paths only.
      real = await realpath(dir);
    } catch (err) {
      const code = errCode(err);
      const why =
        code === 'ENOENT' || code === 'ENOTDIR'
          ? 'does not exist; create it or remove it from the list'
          : `cannot be resolved (${code ?? 'unknown error'}); check that the service user can access it`;
      throw invalid(configPath, key, `${JSON.stringify(dir)} ${why}`);
    }
    let isDir: boolean;
    try {
      isDir = (await stat(real)).isDirectory();
    } catch (err) {
      throw invalid(configPath, key, `${JSON.stringify(dir)} cannot be inspected (${errCode(err) ?? 'unknown error'})`);
    }
    if (!isDir) throw invalid(configPath, key, `${JSON.stringify(dir)} is not a directory; list project root directories only`);
    if (!out.includes(real)) out.push(real);
  }
  return out;
}

async function checkStateDirectory(configPath: string, dir: string): Promise<void> {
  let mode: number;
  try {
    const info = await stat(dir);
    if (!info.isDirectory()) {
      throw invalid(configPath, 'stateDirectory', `${JSON.stringify(dir)} exists but is not a directory; point it at a private directory`);
    }
    mode = info.mode;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    // Absent is fine: the store creates it with mode 700.
    if (errCode(err) === 'ENOENT') return;
    throw invalid(configPath, 'stateDirectory', `${JSON.stringify(dir)} cannot be inspected (${errCode(err) ?? 'unknown error'})`);
  }
  const octal = sharedMode(mode);
  if (octal !== undefined) {
    throw invalid(
      configPath,
      'stateDirectory',
      `${JSON.stringify(dir)} is accessible by group/other (mode ${octal}); state holds private results. Run: chmod 700 ${dir}`,
    );
  }
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    if (!(await stat(path)).isFile()) return false;
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The droid executable the controller would run: `droidPath`, else the first on PATH, else ~/.local/bin/droid. */
export async function resolveDroid(file: Pick<ConfigFile, 'droidPath'>, env: LoadConfigEnv = {}): Promise<string> {
  if (file.droidPath !== undefined) {
    const path = normalize(file.droidPath);
    if (await isExecutableFile(path)) return path;
    throw new ConfigError('droid_not_found', `"droidPath" ${JSON.stringify(path)} is not an executable file. ${INSTALL_HINT}`, 'droidPath');
  }
  const candidates = pathCandidates(env, 'droid');
  const home = env.home ?? homedir();
  if (home !== '' && isAbsolute(home)) candidates.push(join(home, '.local', 'bin', 'droid'));
  for (const candidate of candidates) {
    if (await isExecutableFile(candidate)) return candidate;
  }
  throw new ConfigError(
    'droid_not_found',
    `"droidPath" is not set and no executable droid was found on PATH or at ~/.local/bin/droid. ${INSTALL_HINT}`,
    'droidPath',
  );
}
