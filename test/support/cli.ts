/**
 * The built CLI run as an operator would (`droid-mcp <command> …`), and a
 * fingerprint of a folder's files, to prove a read-only command changed no
 * byte and no mode.
 */
import { createHash } from 'node:crypto';
import { execFile, execFileSync } from 'node:child_process';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { SERVER_ENTRY } from './paths.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SERVER_ENTRY, ...args], { env, encoding: 'utf8', timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Every entry under `dir`: its relative path, type, mode and the SHA-256 of its content (a symlink's target). */
export function treeFingerprint(dir: string): string[] {
  const lines: string[] = [];
  const walk = (path: string): void => {
    const info = lstatSync(path);
    const mode = (info.mode & 0o7777).toString(8);
    const name = relative(dir, path) || '.';
    if (info.isDirectory()) {
      lines.push(`${name}/ ${mode}`);
      for (const entry of readdirSync(path).sort()) walk(join(path, entry));
    } else if (info.isSymbolicLink()) lines.push(`${name} -> ${readlinkSync(path)}`);
    else lines.push(`${name} ${mode} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`);
  };
  walk(dir);
  return lines;
}

/** Config keys for the turn sandbox on this host: bwrap where it is installed, else off. */
export function sandboxKeys(): Record<string, unknown> {
  try {
    const bwrap = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
    return bwrap ? { bwrapPath: bwrap } : { sandbox: 'off' };
  } catch {
    return { sandbox: 'off' };
  }
}
