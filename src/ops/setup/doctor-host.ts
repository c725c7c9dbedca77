/**
 * What a doctor check is, and the checks of what the server owns on the
 * host: its state directory, the approved roots, and for HTTP its token
 * file and port. Read-only, like doctor itself.
 */
import { createServer } from 'node:net';
import { realpath, stat } from 'node:fs/promises';
import { ConfigError } from '../../config/errors.js';
import type { ConfigFile } from '../../config/schema.js';
import { readTokenFile } from '../../config/token.js';
import { HTTP_HOST } from '../../mcp/http/listener.js';
import { StoreError } from '../../store/errors.js';
import { inspectState, type StateSeen } from '../../store/inspect.js';
import { errCode } from '../../util/errno.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a warn or fail. */
  action: string | null;
}

export const ok = (name: string, detail: string): Check => ({ name, status: 'ok', detail, action: null });
export const warn = (name: string, detail: string, action: string): Check => ({ name, status: 'warn', detail, action });
export const fail = (name: string, detail: string, action: string): Check => ({ name, status: 'fail', detail, action });

/** HTTP only: the token file and the port. */
export async function checkHttp(file: ConfigFile, livePid: number | null): Promise<Check[]> {
  const checks: Check[] = [];
  if (file.tokenFile === undefined) {
    checks.push(fail('token', 'transport is http but tokenFile is not set', 'Set "tokenFile" (droid-mcp init --http writes one).'));
  } else {
    try {
      const token = await readTokenFile(file.tokenFile);
      checks.push(ok('token', `${file.tokenFile} is private and holds ${token.length} characters`));
    } catch (err) {
      checks.push(fail('token', describe(err), 'Make a new token file as the message says, then restart the server.'));
    }
  }
  checks.push(await checkPort(file.port, livePid));
  return checks;
}

export function describe(err: unknown): string {
  if (err instanceof ConfigError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

export async function checkState(dir: string): Promise<{ check: Check; livePid: number | null }> {
  const name = 'state directory';
  let seen: StateSeen;
  try {
    seen = await inspectState(dir);
  } catch (err) {
    if (err instanceof StoreError) return { check: fail(name, `start-up would refuse it (${err.code}): ${err.problem}`, err.action), livePid: null };
    return { check: fail(name, `${dir} cannot be inspected (${errCode(err) ?? describe(err)})`, 'Check the path and its parents.'), livePid: null };
  }
  if (!seen.exists) return { check: ok(name, `${dir} does not exist yet: the server creates it (mode 700) at first start`), livePid: null };
  const { owner, lock } = seen;
  const read = `${seen.sessions} session(s) and ${seen.runs} run(s) read as start-up reads them`;
  if (lock.kind === 'live') {
    const who = lock.pid === null ? 'a process that left no owner record' : `a live controller, pid ${lock.pid} (started ${owner?.startedAt ?? 'unknown'})`;
    const stop = lock.pid === null ? 'stop it first' : `stop pid ${lock.pid} first`;
    return {
      check: warn(
        name,
        `${dir} is private and held by ${who}; ${read}`,
        `A second server on it is refused (state_locked); ${stop} if this config is for a new one.`,
      ),
      livePid: lock.pid,
    };
  }
  if (lock.kind === 'unresponsive') {
    return {
      check: warn(
        name,
        `${dir} is private and held by pid ${lock.pid} (started ${owner?.startedAt ?? 'unknown'}), alive but unresponsive (${lock.why}); ${read}`,
        `Find out why pid ${lock.pid} does not answer (kill -CONT ${lock.pid} if it was stopped), or stop it; a start now would take the directory over while it lives.`,
      ),
      livePid: lock.pid,
    };
  }
  const left = seen.inFlight.flatMap((s) => s.turns).length;
  if (seen.tornTail || left > 0) {
    const torn = seen.tornTail
      ? `its journal ends in a torn line (line ${seen.tornTail.line}, ${seen.tornTail.bytes} bytes, never acknowledged): start-up copies it to journal.torn-<time> and cuts it off`
      : '';
    const inFlight = left > 0 ? `${left} turn(s) were left live or queued: start-up marks them unknown / queue_lost` : '';
    return {
      check: warn(
        name,
        `${dir} is private; ${read}; ${[torn, inFlight].filter(Boolean).join('; ')}`,
        'Nothing to fix before starting; afterwards inspect the sessions that need attention (droid-mcp status lists them now).',
      ),
      livePid: null,
    };
  }
  const how =
    lock.kind === 'dead'
      ? `its lock was left by ${lock.dead.pid ? `pid ${lock.dead.pid}, which is gone` : 'a process that is gone'}: the next start takes it over`
      : `free${owner ? ` (last owner pid ${owner.pid} stopped cleanly)` : ''}`;
  return { check: ok(name, `${dir} is private (700) and ${how}; ${read}`), livePid: null };
}

export async function checkRoot(dir: string): Promise<Check> {
  const name = 'approved root';
  let real: string;
  try {
    real = await realpath(dir);
  } catch (err) {
    return fail(
      name,
      `${dir} ${errCode(err) === 'ENOENT' ? 'does not exist' : `cannot be resolved (${errCode(err) ?? 'unknown error'})`}`,
      'Create it, or remove it from approvedDirectories.',
    );
  }
  if (!(await stat(real)).isDirectory()) return fail(name, `${dir} is not a directory`, 'List project root directories only.');
  if (real !== dir)
    return warn(name, `${dir} resolves to ${real} (a symlink): sessions see the real path`, `List ${real} instead, so callers and the server agree on paths.`);
  return ok(name, `${dir} exists, is a directory, canonical`);
}

function checkPort(port: number, livePid: number | null): Promise<Check> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err) => {
      const code = errCode(err);
      if (code === 'EADDRINUSE' && livePid !== null)
        resolve(warn('port', `${HTTP_HOST}:${port} is in use, presumably by the running controller pid ${livePid}`, 'Nothing, if that is this server.'));
      else resolve(fail('port', `${HTTP_HOST}:${port} cannot be bound (${code ?? 'unknown error'})`, 'Stop what listens there, or choose another "port".'));
    });
    server.listen(port, HTTP_HOST, () => server.close(() => resolve(ok('port', `${HTTP_HOST}:${port} is free`))));
  });
}

/** The sandbox check, and the sandbox doctor's own catalog droid runs in (a failing one: the catalog read fails too). */
