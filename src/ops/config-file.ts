/**
 * The config file as the operator commands that only need its paths read it
 * (status, backup, doctor's first line): the raw keys, checked against the
 * schema, without the loader's filesystem checks (a missing droid must not
 * stop `status`). A file the schema refuses is worded by the real loader.
 */
import { readFile } from 'node:fs/promises';
import { loadConfig } from '../config/load.js';
import { configFileSchema, type ConfigFile } from '../config/schema.js';

/** The parsed file; rejects with the loader's own words (ConfigError) when it is missing, not JSON or has bad keys. */
export async function readConfigFile(configPath: string): Promise<ConfigFile> {
  try {
    const parsed = configFileSchema.safeParse(JSON.parse(await readFile(configPath, 'utf8')));
    if (parsed.success) return parsed.data;
  } catch {
    // Missing, unreadable or not JSON: the loader says which.
  }
  await loadConfig(configPath);
  // The loader accepted what the schema did not: never expected, but not silently.
  throw new Error(`${configPath} cannot be read`);
}
