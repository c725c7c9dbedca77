/**
 * A private droid home for running droid offline: `.factory/settings.json`
 * with one BYOK custom model on a loopback URL, and an environment that
 * cannot see the real user's Factory state (settings, sessions, credentials).
 */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DroidClient } from '../droid/client.js';

export const DEMO_MODEL_NAME = 'Demo Model';

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
    // FACTORY_* / DROID_* steer droid (API key, settings paths); droid-mcp's own DROID_MCP_* pass.
    // Under VITEST_WORKER_ID droid keeps its task store in the shared os.tmpdir() (found in its bundle).
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
    FACTORY_DISABLE_KEYRING: '1',
    FACTORY_DROID_AUTO_UPDATE_ENABLED: 'false',
    ...extra,
  });
  return env;
}

/**
 * Writes droid's settings into `home` (an existing private folder). Cloud
 * session sync is off: offline it only retries an unreachable Factory API,
 * which slows every rename by ~15 s (measured).
 */
export async function writeDroidSettings(home: string, baseUrl: string, displayName = DEMO_MODEL_NAME): Promise<void> {
  await mkdir(join(home, '.factory'), { recursive: true, mode: 0o700 });
  const settings = {
    cloudSessionSync: false,
    customModels: [{ model: 'scripted-model', displayName, baseUrl, apiKey: 'offline-demo-key', provider: 'generic-chat-completion-api' }],
  };
  await writeFile(join(home, '.factory', 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
}

/** The id droid gave the custom model (`custom:<Name>-<index>`): read from its catalog, never built by hand. */
export async function customModelId(droidPath: string, env: Record<string, string>, displayName = DEMO_MODEL_NAME): Promise<string> {
  const client = DroidClient.spawn({ droidPath, env, cwd: env.HOME, requestTimeoutMs: 30_000 });
  try {
    const models = await client.listModels();
    const hit = models.find((m) => m.isCustom === true && m.displayName === displayName);
    if (!hit) throw new Error(`droid's catalog has no custom model named ${JSON.stringify(displayName)}`);
    return hit.id;
  } finally {
    await client.shutdown();
  }
}
