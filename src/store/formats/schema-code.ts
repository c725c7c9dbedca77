/**
 * What the code derived from a record schema shares: the start-up guard
 * (record-guard.ts) and the interner (tables/record-interner.ts) each walk a
 * zod schema's definition once and turn every object of it into one
 * function of straight-line property reads (built with `new Function`, as
 * zod builds its own fast path), so every record of a kind runs the same
 * monomorphic code and builds objects of one hidden class. Nothing of the
 * generated code comes from data: keys and constants are the schema's,
 * quoted with JSON.stringify, and every other value the code uses is passed
 * in, named `r[i]`.
 */
import type { z } from 'zod';

/** The definition of a schema part, as zod's own code switches on it. */
export function nodeOf(schema: z.core.$ZodType): z.core.$ZodTypes {
  return schema as z.core.$ZodTypes;
}

/** Values generated code refers to, by the name it uses for each. */
export class Refs {
  readonly values: unknown[] = [];

  /** The name under which generated code reads `value`. */
  ref = (value: unknown): string => `r[${this.values.push(value) - 1}]`;

  /** `fn` (the text of a function expression) made into a function that sees these values as `r`. */
  generate<F>(fn: string): F {
    return new Function('r', `"use strict"; return ${fn};`)(this.values) as F;
  }
}

/** A key or string constant, quoted for code. */
export function quoted(s: string): string {
  return JSON.stringify(s);
}

/** A finite number, as code. */
export function numeric(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`internal: ${n} is not a finite constant`);
  return String(n);
}
