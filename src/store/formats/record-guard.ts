/**
 * Fast checks that a value parsed from a state file is a valid session or
 * run record, for start-up, where 100k records go through the zod schemas
 * of shared/record-schemas.ts and that check was a third of the time to
 * ready. Derived from those schemas, not written beside them: `deriveGuard`
 * walks a schema's definition once and compiles it into plain type tests,
 * so a field added to a schema is checked here with nothing else to write.
 * The common checks (lengths, bounds, safe integers, prefixes) are read
 * from their definitions; any other check (the session's route refinement)
 * is zod's own, run on the value as is.
 *
 * Each object of a schema becomes one function of straight-line property
 * tests (schema-code.ts): closures composed per field were half as fast as
 * the hand-written checks this replaces, generated code is as fast.
 *
 * A guard answers yes only for values the schema accepts unchanged, and may
 * answer no for a value the schema would accept (an object not made by
 * JSON.parse, a key zod would strip, a part of a schema it does not know):
 * the loader then asks zod, which decides and words the refusal. So these
 * checks make loading faster, never more lenient;
 * test/unit/store/formats/record-guard.test.ts checks that they agree with
 * the schemas on arbitrary and damaged records. Pure.
 */
import type { z } from 'zod';
import { runRecordSchema, sessionRecordSchema, type RunRecord, type SessionRecord } from '../../shared/record-schemas.js';
import { nodeOf, numeric, quoted, Refs } from './schema-code.js';

type Check = (v: unknown) => boolean;
/** A part of a schema as a JavaScript test of the variable `x`; `ref` names a value the test reads or calls. */
type Test = (ref: (value: unknown) => string) => string;

interface Guard<T> {
  /** Yes only if the schema accepts `v` as it is. */
  accepts: (v: unknown) => v is T;
  /** Where the schema has a part the guard cannot check (it answers no there): empty for a guard that covers it all. */
  uncovered: readonly string[];
}

/** The guard of `schema`: its definition walked once, into plain checks. */
function deriveGuard<T>(schema: z.ZodType<T>): Guard<T> {
  const uncovered: string[] = [];
  const check = toFunction(compile(schema, '(record)', uncovered));
  return { accepts: check as (v: unknown) => v is T, uncovered };
}

const sessionGuard = deriveGuard(sessionRecordSchema);
const runGuard = deriveGuard(runRecordSchema);

export const isSessionRecord: (v: unknown) => v is SessionRecord = sessionGuard.accepts;
export const isRunRecord: (v: unknown) => v is RunRecord = runGuard.accepts;

/** Both record guards, for the test that they leave nothing of their schema to zod. */
export const recordGuards = { session: sessionGuard, run: runGuard } as const;

/** The type test of `schema`, then its checks, in zod's order. */
function compile(schema: z.core.$ZodType, path: string, uncovered: string[]): Test {
  const type = typeTest(nodeOf(schema), path, uncovered);
  const checks = checksOf(schema).map(checkTest);
  if (checks.length === 0) return type;
  return (ref) => `(${[type(ref), ...checks.map((c) => c(ref))].join(' && ')})`;
}

function typeTest(schema: z.core.$ZodTypes, path: string, uncovered: string[]): Test {
  const def = schema._zod.def;
  const gap = (): Test => {
    uncovered.push(`${path}: ${def.type}`);
    return () => 'false';
  };
  switch (def.type) {
    case 'string':
      return def.coerce ? gap() : () => 'typeof x === "string"';
    case 'number':
      // zod refuses NaN and ±Infinity; isFinite does too.
      return def.coerce ? gap() : () => '(typeof x === "number" && Number.isFinite(x))';
    case 'boolean':
      return def.coerce ? gap() : () => 'typeof x === "boolean"';
    case 'null':
      return () => 'x === null';
    case 'unknown':
    case 'any':
      return () => 'true';
    case 'literal':
    case 'enum': {
      const values = schema._zod.values;
      if (values === undefined) return gap();
      const [only] = values;
      if (values.size === 1 && isConstant(only)) return () => `x === ${constant(only)}`;
      return (ref) => `${ref(values)}.has(x)`;
    }
    case 'optional': {
      const inner = compile(def.innerType, path, uncovered);
      return (ref) => `(x === undefined || ${inner(ref)})`;
    }
    case 'nullable': {
      const inner = compile(def.innerType, path, uncovered);
      return (ref) => `(x === null || ${inner(ref)})`;
    }
    case 'array': {
      const item = toFunction(compile(def.element, `${path}[]`, uncovered));
      const array: Check = (v) => {
        if (!Array.isArray(v)) return false;
        // Every index, holes included (`every` would skip them; zod reads each as undefined).
        for (let i = 0; i < v.length; i++) if (!item(v[i])) return false;
        return true;
      };
      return (ref) => `${ref(array)}(x)`;
    }
    case 'object': {
      const object = objectCheck(def, path, uncovered);
      return (ref) => `${ref(object)}(x)`;
    }
    case 'record': {
      // Enumerated keys make a record exhaustive: not a shape the records use.
      if (def.keyType._zod.values !== undefined) return gap();
      const key = toFunction(compile(def.keyType, `${path} key`, uncovered));
      const value = toFunction(compile(def.valueType, `${path}{}`, uncovered));
      // zod drops a `__proto__` key: such a record is not accepted unchanged.
      const record: Check = (v) => isPlain(v) && Reflect.ownKeys(v).every((k) => typeof k === 'string' && k !== '__proto__' && key(k) && value(v[k]));
      return (ref) => `${ref(record)}(x)`;
    }
    case 'union': {
      // A discriminated union picks its option by the discriminator's value, which no other option
      // accepts: the same answer as trying them all.
      const options = def.options.map((o, i) => toFunction(compile(o, `${path}|${i}`, uncovered)));
      const union: Check = (v) => options.some((option) => option(v));
      return (ref) => `${ref(union)}(x)`;
    }
    default:
      // Transforms, defaults, pipes and the rest change or could change the value: zod decides.
      return gap();
  }
}

/**
 * One function for an object schema: its prototype, each field's test in
 * the schema's order, then its keys. No catchall: zod strips unknown keys
 * (the value would change), so they are refused here, as a strict object
 * refuses them; a loose one keeps them as they are.
 */
function objectCheck(def: z.core.$ZodObjectDef, path: string, uncovered: string[]): Check {
  const keys = Object.keys(def.shape);
  const fields = keys.map((k) => compile(def.shape[k]!, path === '(record)' ? k : `${path}.${k}`, uncovered));
  const catchall = def.catchall?._zod.def.type;
  const extraAllowed = catchall === 'unknown' || catchall === 'any';
  if (catchall !== undefined && catchall !== 'never' && !extraAllowed) uncovered.push(`${path}: catchall ${catchall}`);
  const refs = new Refs();
  const ref = refs.ref;
  const lines = [
    'if (typeof v !== "object" || v === null || Object.getPrototypeOf(v) !== Object.prototype) return false;',
    'let x;',
    ...keys.map((k, i) => `x = v[${quoted(k)}]; if (!(${fields[i]!(ref)})) return false;`),
    // For-in over a plain object: its own enumerable keys (Object.prototype has none).
    ...(extraAllowed ? [] : [`for (const k in v) if (!${ref(new Set(keys))}.has(k)) return false;`]),
    'return true;',
  ];
  return refs.generate(`function (v) {\n${lines.join('\n')}\n}`);
}

/** A test as a function of its own (the test, wrapped; an object's own function as it is). */
function toFunction(test: Test): Check {
  const refs = new Refs();
  return refs.generate(`(x) => (${test(refs.ref)})`);
}

/** The checks zod runs on a value of `schema` once its type is right: a string format's own, then those added to it. */
function checksOf(schema: z.core.$ZodType): z.core.$ZodCheck<unknown>[] {
  const own = schema._zod.traits.has('$ZodCheck') ? [schema as unknown as z.core.$ZodCheck<unknown>] : [];
  return [...own, ...((schema._zod.def.checks ?? []) as unknown as z.core.$ZodCheck<unknown>[])];
}

/**
 * A check as a test. The common kinds are read from their definitions: what
 * zod's check of that kind tests, without its payload. Their `when` is not
 * asked: running a check zod would skip can only refuse more, never accept
 * more. Any other kind runs zod's own check.
 */
function checkTest(check: z.core.$ZodCheck<unknown>): Test {
  const def = check._zod.def as z.core.$ZodChecks['_zod']['def'];
  switch (def.check) {
    case 'min_length':
      return () => `x.length >= ${numeric(def.minimum)}`;
    case 'max_length':
      return () => `x.length <= ${numeric(def.maximum)}`;
    case 'greater_than':
      if (typeof def.value === 'number' && Number.isFinite(def.value)) return () => `x ${def.inclusive ? '>=' : '>'} ${numeric(def.value as number)}`;
      break;
    case 'less_than':
      if (typeof def.value === 'number' && Number.isFinite(def.value)) return () => `x ${def.inclusive ? '<=' : '<'} ${numeric(def.value as number)}`;
      break;
    case 'number_format':
      if (def.format === 'safeint') return () => 'Number.isSafeInteger(x)';
      break;
    case 'string_format':
      if (def.format === 'starts_with') return () => `x.startsWith(${quoted((def as z.core.$ZodCheckStartsWithDef).prefix)})`;
      break;
  }
  const run = runCheck(check);
  return (ref) => `${ref(run)}(x)`;
}

/** Runs zod's own check on a value, as zod does (its `when`, if any, decides whether it runs). */
function runCheck(check: z.core.$ZodCheck<unknown>): Check {
  // One payload per check, reused: checks are synchronous and never re-entered.
  const payload: z.core.ParsePayload = { value: undefined, issues: [] };
  const when = check._zod.def.when;
  return (v) => {
    payload.value = v;
    payload.issues.length = 0;
    if (when !== undefined && !when(payload)) return true;
    const result = check._zod.check(payload);
    if (result instanceof Promise) {
      // An asynchronous refinement has no fast answer: zod decides (and reports it).
      result.catch(() => undefined);
      return false;
    }
    return payload.issues.length === 0;
  };
}

function isConstant(v: unknown): v is string | boolean | number | null {
  return typeof v === 'string' || typeof v === 'boolean' || v === null || (typeof v === 'number' && Number.isFinite(v));
}

function constant(v: string | boolean | number | null): string {
  return typeof v === 'string' ? quoted(v) : String(v);
}

/** A plain object as JSON.parse makes them (so no accessors, no odd prototype). */
function isPlain(v: unknown): v is Record<string | symbol, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}
