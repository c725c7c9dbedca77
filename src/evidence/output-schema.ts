/**
 * The caller's JSON Schema for a turn's structured output: bounds checked
 * before a turn is accepted, and droid's answer validated again on our side
 * with ajv (a maintained validator; droid 0.225 validates too, and its
 * messages look like ajv's, but a caller should not have to trust that).
 * No I/O.
 */
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';

/** Serialized size limit of a schema. */
export const MAX_SCHEMA_BYTES = 32 * 1024;
/** Nesting limit of objects and arrays in a schema. */
export const MAX_SCHEMA_DEPTH = 32;
/** Limit on the number of object keys in a schema, over all levels. */
export const MAX_SCHEMA_KEYS = 2_000;
/** Serialized size limit of a structured output we keep and show. */
const MAX_OUTPUT_BYTES = 16 * 1024;
/** How many validation problems a result keeps. */
const MAX_PROBLEMS = 10;

export type JsonObject = { [key: string]: unknown };

export type SchemaCheck = { ok: true; schema: JsonObject; bytes: number } | { ok: false; reason: string };

type AjvConstructor = new (options: { allErrors: boolean; strict: boolean }) => { compile(schema: object): ValidateFunction };
let Ajv: AjvConstructor | undefined;

/**
 * ajv is loaded at its first use, not with this module: it is a quarter of
 * the worker's bundle, which every cold turn loads before it spawns droid,
 * and only turns that ask for structured output need it (after their end).
 * It stays a plain dependency: the bundle leaves this require to Node.
 */
function newAjv() {
  if (!Ajv) {
    // ajv is CommonJS: its class is the module's `default` (or the module itself).
    const loaded = createRequire(import.meta.url)('ajv') as { default?: AjvConstructor } & AjvConstructor;
    Ajv = loaded.default ?? loaded;
  }
  // strict: false — droid accepts annotations and unknown keywords; a schema
  // that is actually invalid (bad types, unresolvable $ref) still fails to compile.
  return new Ajv({ allErrors: true, strict: false });
}

/** Checks size, depth, key count, an object root (droid requires one) and that ajv compiles it. */
export function checkOutputSchema(schema: unknown): SchemaCheck {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { ok: false, reason: 'outputSchema must be a JSON object' };
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch {
    return { ok: false, reason: 'outputSchema is not serializable JSON' };
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_SCHEMA_BYTES) return { ok: false, reason: `outputSchema is ${bytes} bytes serialized; the limit is ${MAX_SCHEMA_BYTES}` };
  const shape = measure(schema);
  if (shape.depth > MAX_SCHEMA_DEPTH) return { ok: false, reason: `outputSchema nests ${shape.depth} levels deep; the limit is ${MAX_SCHEMA_DEPTH}` };
  if (shape.keys > MAX_SCHEMA_KEYS) return { ok: false, reason: `outputSchema has ${shape.keys} keys; the limit is ${MAX_SCHEMA_KEYS}` };
  const root = schema as JsonObject;
  if (root.type !== 'object')
    return { ok: false, reason: 'outputSchema must describe an object: its root needs "type": "object" (droid requires an object root)' };
  try {
    newAjv().compile(root);
  } catch (err) {
    return { ok: false, reason: `outputSchema is not a valid JSON Schema: ${(err as Error).message.slice(0, 500)}` };
  }
  return { ok: true, schema: root, bytes };
}

function measure(value: unknown, depth = 1): { depth: number; keys: number } {
  if (typeof value !== 'object' || value === null) return { depth: depth - 1, keys: 0 };
  let deepest = depth;
  let keys = 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  if (!Array.isArray(value)) keys += children.length;
  for (const child of children) {
    const m = measure(child, depth + 1);
    deepest = Math.max(deepest, m.depth);
    keys += m.keys;
  }
  return { depth: deepest, keys };
}

/** The verdict on what droid returned for a turn that asked for structured output. */
export type OutputVerdict = { status: 'valid'; value: JsonObject } | { status: 'invalid' | 'too_large' | 'missing'; problems: string[] };

/** Validates droid's object against the schema (already checked by checkOutputSchema). */
export function judgeStructuredOutput(schema: JsonObject, value: unknown): OutputVerdict {
  if (value === undefined) return { status: 'missing', problems: ['droid reported no structured output for this turn'] };
  const text = JSON.stringify(value) ?? '';
  if (Buffer.byteLength(text, 'utf8') > MAX_OUTPUT_BYTES) {
    return { status: 'too_large', problems: [`the structured output is larger than ${MAX_OUTPUT_BYTES} bytes serialized`] };
  }
  let validate: ValidateFunction;
  try {
    validate = newAjv().compile(schema);
  } catch (err) {
    return { status: 'invalid', problems: [`the schema does not compile: ${(err as Error).message.slice(0, 300)}`] };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { status: 'invalid', problems: ['/ must be object'] };
  if (validate(value)) return { status: 'valid', value: value as JsonObject };
  const problems = (validate.errors ?? []).slice(0, MAX_PROBLEMS).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`.slice(0, 300));
  return { status: 'invalid', problems: problems.length ? problems : ['invalid'] };
}

/** Key-sorted JSON, so equal schemas fingerprint equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as JsonObject)[k])}`);
  return `{${entries.join(',')}}`;
}
