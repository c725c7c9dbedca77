/**
 * The config file as JSON, and the schema's refusals worded for the
 * operator: each names the key to fix and how (errors.ts).
 */
import { readFile } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import type { z } from 'zod';
import { errCode } from '../util/errno.js';
import { ConfigError } from './errors.js';
import { CONFIG_KEYS, REMOVED_KEYS } from './schema.js';

export async function readConfigJson(configPath: string): Promise<unknown> {
  if (typeof configPath !== 'string' || configPath === '' || !isAbsolute(configPath) || configPath.includes('\0')) {
    throw new ConfigError(
      'config_invalid',
      `--config must be an absolute path to the JSON config file; got ${JSON.stringify(configPath)}. Pass --config /absolute/path/to/config.json`,
      '--config',
    );
  }
  let text: string;
  try {
    text = await readFile(configPath, 'utf8');
  } catch (err) {
    const code = errCode(err);
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EISDIR'
          ? 'is a directory, not a file'
          : code === 'EACCES' || code === 'EPERM'
            ? 'is not readable by this user'
            : `cannot be read (${code ?? 'unknown error'})`;
    throw new ConfigError(
      'config_invalid',
      `Config file ${configPath} ${why}. Pass --config with the absolute path of a readable JSON file (see config.example.json).`,
      '--config',
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    throw new ConfigError(
      'config_invalid',
      `Config file ${configPath} is not valid JSON (${detail}). Fix the syntax; comments and trailing commas are not allowed.`,
      '--config',
    );
  }
}

function keyName(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(top level)' : out;
}

export function fromIssues(configPath: string, issues: readonly z.core.$ZodIssue[]): ConfigError {
  const lines: { key: string; text: string }[] = [];
  for (const issue of issues) {
    const at = keyName(issue.path);
    if (issue.code === 'unrecognized_keys') {
      const parent = issue.path.map(String).join('.');
      const allowed = CONFIG_KEYS[parent];
      for (const unknown of issue.keys) {
        const key = parent === '' ? unknown : `${parent}.${unknown}`;
        const removed = REMOVED_KEYS[key];
        const text = removed ?? `is not a known setting; remove it${allowed ? ` (allowed${parent === '' ? '' : ` in ${parent}`}: ${allowed.join(', ')})` : ''}`;
        lines.push({ key, text });
      }
    } else {
      lines.push({ key: at, text: issue.message });
    }
  }
  const first = lines[0] ?? { key: '(top level)', text: 'is invalid' };
  const body = lines.length === 1 ? `"${first.key}" ${first.text}` : lines.map((l) => `\n- "${l.key}" ${l.text}`).join('');
  return new ConfigError('config_invalid', `Invalid config ${configPath}: ${body}`, first.key);
}
