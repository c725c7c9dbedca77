/** Assertions shared by the unit tests of pure controller logic. */
import { expect } from 'vitest';
import { ControllerError } from '../../src/controller/errors.js';

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
