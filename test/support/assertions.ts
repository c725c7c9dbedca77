/** Assertions shared by the tests. */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ControllerError } from '../../src/shared/public-error.js';

/** Runs `fn`, expecting a ControllerError with `code` and a real `action`; returns it. */
export function expectRejection(fn: () => unknown, code: string): ControllerError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ControllerError);
    const e = err as ControllerError;
    expect(e.code).toBe(code);
    expect(e.action.length).toBeGreaterThan(10);
    return e;
  }
  throw new Error(`expected ${code}`);
}

/**
 * What a run left in a temp folder: every entry, except the sandbox's
 * private temp root (`droid-mcp-<uid>`, src/sandbox/sandbox.ts), which stays
 * by design but must be empty; its leftovers are listed inside it.
 */
export function leftBehind(dir: string): string[] {
  const root = `droid-mcp-${process.getuid?.() ?? 0}`;
  return readdirSync(dir).flatMap((name) => (name === root ? readdirSync(join(dir, name)).map((inner) => `${name}/${inner}`) : [name]));
}
