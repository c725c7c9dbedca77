/**
 * A private droid home for running droid offline: `.factory/settings.json`
 * with one BYOK custom model pointing at the scripted model server, and an
 * environment that cannot see the real user's Factory state (settings,
 * sessions, credentials).
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DroidClient } from '../droid/client.js';
import { startModelServer, type ModelServer } from './model-server.js';

export type DroidHome = {
  dir: string;
  env: Record<string, string>;
  cleanup(): Promise<void>;
};

/** Model server + home + the model id droid assigned, torn down together. */
export type DroidBed = {
  model: ModelServer;
  home: DroidHome;
  modelId: string;
  droidPath: string;
  cleanup(): Promise<void>;
};

const DEFAULT_DISPLAY_NAME = 'Scripted Model';

/** The droid CLI pinned in package.json, when this platform's package is installed. */
export function pinnedDroidPath(): string | null {
  try {
    const pkg = createRequire(import.meta.url).resolve(`@factory/cli-${process.platform}-${process.arch}/package.json`);
    const bin = join(dirname(pkg), 'bin', 'droid');
    return existsSync(bin) ? bin : null;
  } catch {
    return null;
  }
}

/** This process's environment minus what would point droid elsewhere, with HOME and Factory home at `home`. */
export function isolatedEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    // FACTORY_* / DROID_* steer droid (API key, settings paths, runtime settings);
    // droid-mcp's own DROID_MCP_* (test tags among them) pass. Under VITEST_WORKER_ID droid
    // writes factory-task-invocations-<pid>.json into the shared os.tmpdir() (found in its bundle).
    if (k.startsWith('FACTORY_') || (k.startsWith('DROID_') && !k.startsWith('DROID_MCP_')) || k.startsWith('VITEST')) continue;
    env[k] = v;
  }
  Object.assign(env, {
    HOME: home,
    FACTORY_HOME_OVERRIDE: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_DATA_HOME: join(home, '.local/share'),
    XDG_STATE_HOME: join(home, '.local/state'),
    FACTORY_DISABLE_KEYRING: '1', // never touch the OS credential store
    FACTORY_DROID_AUTO_UPDATE_ENABLED: 'false',
    ...extra,
  });
  return env;
}

/**
 * Writes droid's settings into `dir` (an existing private folder) and returns
 * the home; its cleanup removes `dir`. Fields found by experiment on 0.225.2:
 * `model`, `baseUrl` and `provider` are required for the entry to appear in
 * the catalog; `displayName` sets the id (`custom:<Display-Name>-<index>`);
 * `apiKey` is optional but sent as the bearer token, so a dummy keeps the
 * request shape realistic.
 */
export async function writeDroidHome(dir: string, opts: { baseUrl: string; displayName?: string }): Promise<DroidHome> {
  await mkdir(join(dir, '.factory'), { recursive: true, mode: 0o700 });
  const settings = {
    // Offline, cloud sync only retries against an unreachable api.factory.ai:
    // rename_session then waits ~15 s for it (5 ms with sync off, measured). Off, as for an
    // operator without Factory web sync.
    cloudSessionSync: false,
    customModels: [
      {
        model: 'scripted-model',
        displayName: opts.displayName ?? DEFAULT_DISPLAY_NAME,
        baseUrl: opts.baseUrl,
        apiKey: 'offline-scripted-key',
        provider: 'generic-chat-completion-api',
      },
    ],
  };
  await writeFile(join(dir, '.factory', 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
  return {
    dir,
    env: isolatedEnv(dir),
    cleanup: () => rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }),
  };
}

/** The id droid gave the custom model (`custom:<Name>-<index>`): read from a fresh droid's catalog, never built by hand. */
export async function customModelId(droidPath: string, env: Record<string, string>, displayName = DEFAULT_DISPLAY_NAME): Promise<string> {
  const client = DroidClient.spawn({ droidPath, env, cwd: env.HOME, requestTimeoutMs: 20_000 });
  try {
    const models = await client.listModels();
    const hit = models.find((m) => m.isCustom === true && m.displayName === displayName);
    if (hit) return hit.id;
    const custom = models.filter((m) => m.isCustom === true).map((m) => m.displayName);
    throw new Error(`droid's catalog has no custom model named ${JSON.stringify(displayName)}; custom models: ${JSON.stringify(custom)}`);
  } catch (err) {
    const stderr = client.process.stderr.toString().slice(-500);
    throw stderr ? new Error(`${err instanceof Error ? err.message : String(err)}; droid's stderr: ${stderr}`) : err;
  } finally {
    // A one-shot process with no session: nothing to close gracefully.
    client.process.kill('SIGKILL');
    await client.process.exited;
  }
}

/** Starts the scripted model, writes a fresh private home for it, and reads the id droid gives the model. */
export async function makeDroidBed(opts: { droidPath: string; displayName?: string }): Promise<DroidBed> {
  const displayName = opts.displayName ?? DEFAULT_DISPLAY_NAME;
  const model = await startModelServer();
  let home: DroidHome | undefined;
  try {
    const dir = await mkdtemp(join(tmpdir(), 'droid-home-'));
    await chmod(dir, 0o700);
    home = await writeDroidHome(dir, { baseUrl: model.baseUrl, displayName });
    const modelId = await customModelId(opts.droidPath, home.env, displayName);
    const h = home;
    return {
      model,
      home: h,
      modelId,
      droidPath: opts.droidPath,
      cleanup: async () => {
        await model.close();
        await h.cleanup();
      },
    };
  } catch (e) {
    await model.close();
    await home?.cleanup();
    throw e;
  }
}
