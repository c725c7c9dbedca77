/**
 * The crash-point hook: what DROID_MCP_CRASH_AT accepts, and that a matching
 * arrival really is a SIGKILL of the process, on exactly the N-th arrival.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CRASH_POINTS, parseCrashAt } from '../../../src/util/crash-point.js';
import { REPO_ROOT } from '../../support/paths.js';

describe('parseCrashAt', () => {
  it('unset or empty means no plan', () => {
    expect(parseCrashAt(undefined)).toBeNull();
    expect(parseCrashAt('')).toBeNull();
  });

  it('a bare name crashes on the first arrival; name:N on the N-th', () => {
    for (const name of CRASH_POINTS) {
      expect(parseCrashAt(name)).toEqual({ name, hit: 1 });
      expect(parseCrashAt(`${name}:3`)).toEqual({ name, hit: 3 });
    }
    expect(parseCrashAt('terminal-persisted:120')).toEqual({ name: 'terminal-persisted', hit: 120 });
  });

  it.each(['bogus', 'Accepted', 'accepted:0', 'accepted:-1', 'accepted:', 'accepted:1.5', 'accepted:x', ' accepted', 'accepted:2:3', 'started,spawned'])(
    'refuses %j, naming the valid points',
    (value) => {
      expect(() => parseCrashAt(value)).toThrow(new RegExp(CRASH_POINTS.join(', ')));
    },
  );
});

describe('crashPoint', () => {
  // A child process imports the built module with the variable set and walks the points.
  const entry = pathToFileURL(join(REPO_ROOT, 'dist/src/util/crash-point.js')).href;
  const walk = (crashAt: string | undefined) => {
    const code = `
      const { crashPoint } = await import(${JSON.stringify(entry)});
      for (const name of ['accepted', 'spawned', 'accepted', 'started', 'accepted']) {
        process.stdout.write(name + '\\n');
        crashPoint(name);
      }
      process.stdout.write('survived\\n');
    `;
    const env = { ...process.env };
    if (crashAt === undefined) delete env.DROID_MCP_CRASH_AT;
    else env.DROID_MCP_CRASH_AT = crashAt;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', code], { env, encoding: 'utf8' });
    return { signal: out.signal, status: out.status, lines: out.stdout.split('\n').filter(Boolean), stderr: out.stderr };
  };

  it('without the variable nothing happens', () => {
    expect(walk(undefined)).toMatchObject({ signal: null, status: 0, lines: ['accepted', 'spawned', 'accepted', 'started', 'accepted', 'survived'] });
  });

  it('kills with SIGKILL on the first arrival, and says where on stderr', () => {
    const r = walk('spawned');
    expect(r).toMatchObject({ signal: 'SIGKILL', lines: ['accepted', 'spawned'] });
    expect(JSON.parse(r.stderr.trim())).toMatchObject({ msg: 'crash point reached', crashPoint: 'spawned', hit: 1 });
  });

  it('name:N counts only arrivals at that point', () => {
    expect(walk('accepted:2')).toMatchObject({ signal: 'SIGKILL', lines: ['accepted', 'spawned', 'accepted'] });
    expect(walk('accepted:3').lines).toEqual(['accepted', 'spawned', 'accepted', 'started', 'accepted']);
    expect(walk('accepted:4')).toMatchObject({ signal: null, status: 0 });
  });

  it('an invalid value refuses to load instead of never crashing', () => {
    const r = walk('accepted:0');
    expect(r.status).not.toBe(0);
    expect(r.signal).toBeNull();
    expect(r.stderr).toContain('DROID_MCP_CRASH_AT');
  });
});
