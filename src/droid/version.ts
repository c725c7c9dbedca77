/**
 * The droid CLI's own version, for the log and `droid_list_workspaces`.
 * `droid --version` prints it bare (≈ 25 ms on 0.225.2, ≈ 450 ms on 0.215.0)
 * and touches no state. Read at start-up and again once older than a TTL, so
 * a binary updated in place is noticed; concurrent callers share one read.
 */
import { execFile } from 'node:child_process';
import { DroidError } from './errors.js';
import { assertDroidExecutable } from './process.js';
import { head } from '../util/text.js';

const VERSION_TIMEOUT_MS = 10_000;
/** `0.225.2`, `0.215.0`, `1.2.3-beta.1`, `0.225.2-mock`. */
const VERSION = /^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$/;

/** Runs `droid --version`; rejects with a DroidError naming what went wrong. */
export async function readDroidVersion(droidPath: string, env: NodeJS.ProcessEnv, timeoutMs = VERSION_TIMEOUT_MS): Promise<string> {
  assertDroidExecutable(droidPath);
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(droidPath, ['--version'], { env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024, encoding: 'utf8' }, (err, out, errOut) => {
      if (!err) return resolve(out);
      const why = err.killed ? `did not answer within ${timeoutMs} ms` : `failed (${err.code ?? err.signal ?? err.message})`;
      const stderr = errOut.trim() ? `: ${head(errOut.trim(), 300)}` : '';
      reject(new DroidError('droid_version_unreadable', `droid --version ${why}${stderr}`));
    });
  });
  const version = stdout.trim();
  if (!VERSION.test(version)) {
    throw new DroidError('droid_version_unreadable', `droid --version printed ${JSON.stringify(head(version, 100))}, not a version number`);
  }
  return version;
}

export interface VersionChange {
  version: string | null;
  /** undefined on the first read. */
  previous: string | null | undefined;
  /** Why the version could not be read (when `version` is null). */
  error?: unknown;
}

export class DroidVersionProbe {
  private cached: { version: string | null; at: number } | undefined;
  private inflight: Promise<string | null> | undefined;

  constructor(
    private readonly read: () => Promise<string>,
    private readonly ttlMs: number,
    /** Called on the first read and whenever the version (or its readability) changes. */
    private readonly onChange: (change: VersionChange) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  /** The version, or null when it could not be read (the reason went to onChange). */
  current(): Promise<string | null> {
    if (this.cached && this.now() - this.cached.at < this.ttlMs) return Promise.resolve(this.cached.version);
    this.inflight ??= this.refresh().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async refresh(): Promise<string | null> {
    const previous = this.cached?.version;
    let version: string | null = null;
    let error: unknown;
    try {
      version = await this.read();
    } catch (err) {
      error = err;
    }
    this.cached = { version, at: this.now() };
    if (version !== previous) this.onChange(error === undefined ? { version, previous } : { version, previous, error });
    return version;
  }
}
