// A private droid home per test: settings with one BYOK model pointing at the
// scripted model server, and an env that cannot see the real user's Factory
// state (settings, sessions, credentials).
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startModelServer, type ModelServer } from './model-server.js';
import { DROID_PATH } from './paths.js';

export type DroidHome = {
  dir: string;
  env: Record<string, string>;
  cleanup(): Promise<void>;
};

export type DroidBed = {
  model: ModelServer;
  home: DroidHome;
  modelId: string;
  droidPath: string;
  cleanup(): Promise<void>;
};

export const DEFAULT_DISPLAY_NAME = 'Scripted Model';

export { DROID_PATH };

/** Env of the test process minus anything that would point droid elsewhere. */
function isolatedEnv(dir: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    // FACTORY_* / DROID_* steer droid (API key, settings paths, runtime settings);
    // our own DROID_MCP_* test tags are allowed through. Under VITEST_WORKER_ID droid
    // writes factory-task-invocations-<pid>.json into the shared os.tmpdir() (found in its bundle).
    if (k.startsWith('FACTORY_') || (k.startsWith('DROID_') && !k.startsWith('DROID_MCP_')) || k.startsWith('VITEST')) continue;
    env[k] = v;
  }
  env.HOME = dir;
  env.FACTORY_HOME_OVERRIDE = dir;
  env.XDG_CONFIG_HOME = path.join(dir, '.config');
  env.XDG_CACHE_HOME = path.join(dir, '.cache');
  env.XDG_DATA_HOME = path.join(dir, '.local/share');
  env.XDG_STATE_HOME = path.join(dir, '.local/state');
  env.FACTORY_DISABLE_KEYRING = '1'; // never touch the OS credential store
  env.FACTORY_DROID_AUTO_UPDATE_ENABLED = 'false';
  return env;
}

/**
 * Fields found by experiment on 0.225.2: `model`, `baseUrl` and `provider`
 * are required for the entry to appear in the catalog; `displayName` sets
 * the id (`custom:<Display-Name>-<index>`); `apiKey` is optional but sent
 * as the bearer token, so a dummy keeps the request shape realistic.
 */
export async function makeDroidHome(opts: { baseUrl: string; displayName?: string }): Promise<DroidHome> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'droid-home-'));
  await chmod(dir, 0o700);
  await mkdir(path.join(dir, '.factory'), { mode: 0o700 });
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
        apiKey: 'dummy-test-key',
        provider: 'generic-chat-completion-api',
      },
    ],
  };
  await writeFile(path.join(dir, '.factory', 'settings.json'), JSON.stringify(settings, null, 2), { mode: 0o600 });
  return {
    dir,
    env: isolatedEnv(dir),
    cleanup: () => rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }),
  };
}

type ListedModel = { id?: unknown; displayName?: unknown; isCustom?: unknown };

/** Asks a fresh droid for its catalog and returns the id droid gave our model. */
export function readCustomModelId(
  droidPath: string,
  env: Record<string, string>,
  displayName: string,
  timeoutMs = 20_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(droidPath, ['exec', '--input-format', 'stream-jsonrpc', '--output-format', 'stream-jsonrpc'], {
      env,
      cwd: env.HOME,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let settled = false;
    const finish = (e: Error | undefined, id?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL'); // one-shot process: no graceful shutdown needed
      if (e) reject(e);
      else resolve(id!);
    };
    const timer = setTimeout(() => finish(new Error(`droid.list_models timed out after ${timeoutMs} ms; stderr: ${err.slice(-500)}`)), timeoutMs);
    child.on('error', (e) => finish(e));
    child.on('exit', (code, sig) => finish(new Error(`droid exited (${code ?? sig}) before list_models answered; stderr: ${err.slice(-500)}`)));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        let frame: { id?: unknown; result?: { models?: ListedModel[] }; error?: unknown };
        try {
          frame = JSON.parse(line) as typeof frame;
        } catch {
          continue; // not ours to judge here
        }
        if (frame.id !== 'm1') continue;
        if (frame.error) return finish(new Error(`droid.list_models failed: ${JSON.stringify(frame.error)}`));
        const models = frame.result?.models ?? [];
        const hit = models.find((m) => m.isCustom === true && m.displayName === displayName);
        if (typeof hit?.id === 'string') return finish(undefined, hit.id);
        const custom = models.filter((m) => m.isCustom === true).map((m) => m.displayName);
        return finish(new Error(`no custom model named ${JSON.stringify(displayName)}; custom models: ${JSON.stringify(custom)}`));
      }
    });
    const request = { jsonrpc: '2.0', type: 'request', factoryApiVersion: '1.0.0', id: 'm1', method: 'droid.list_models', params: {} };
    child.stdin.on('error', () => undefined); // EPIPE if droid dies first; 'exit' reports it
    child.stdin.write(`${JSON.stringify(request)}\n`);
  });
}

/** Model server + home + the model id droid assigned, torn down together. */
export async function makeDroidBed(opts: { displayName?: string } = {}): Promise<DroidBed> {
  const displayName = opts.displayName ?? DEFAULT_DISPLAY_NAME;
  const model = await startModelServer();
  let home: DroidHome | undefined;
  try {
    home = await makeDroidHome({ baseUrl: model.baseUrl, displayName });
    const modelId = await readCustomModelId(DROID_PATH, home.env, displayName);
    const h = home;
    return {
      model,
      home: h,
      modelId,
      droidPath: DROID_PATH,
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
