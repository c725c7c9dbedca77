/**
 * Frozen, memory-lean copies of validated records. With 100k runs in memory
 * the shape of each object matters more than its data:
 *
 * - every record and sub-object is built by one object literal in schema
 *   order, so all of a kind share one hidden class and keep their fields
 *   inline (objects made by JSON.parse or by the schema's copy are larger);
 * - repeated strings (times, models, workspaces, labels, …) are shared
 *   through a bounded cache, a value of an enumeration is the schema's own
 *   string, and a run's `sessionId` shares the session's own id string;
 * - identical small objects (settings, errors, label lists) and every empty
 *   list are shared; that is safe because everything handed out is frozen.
 *
 * The copies are derived from the record schemas (shared/record-schemas.ts),
 * not written beside them: each object of a schema becomes one generated
 * function (formats/schema-code.ts) that copies its fields in the schema's
 * order, so a field added to a schema is copied with nothing written here.
 * What this file says is only how fields are kept, by name (`KEEP`).
 *
 * The copies are deep: nothing of the input is kept but its strings, so a
 * caller that changes its objects later changes nothing stored. An optional
 * field left undefined stays absent.
 */
import type { z } from 'zod';
import { runRecordSchema, sessionRecordSchema, type RunRecord, type SessionRecord } from '../../shared/record-schemas.js';
import { nodeOf, quoted, Refs } from '../formats/schema-code.js';

/** How fields are kept, by name, wherever they appear in a record; every other string goes through the cache. */
const KEEP = {
  /** Strings unique to their record: kept as read, no cache slot spent on them. */
  unique: new Set(['id', 'runId', 'requestKey', 'preview', 'droidSessionId', 'headRunId', 'handle']),
  /** Small objects and lists that many records hold equal copies of: one frozen copy, shared. */
  shared: new Set(['settings', 'error', 'failure', 'labels']),
  /** A run's session: the session's own id string. */
  sessionRef: 'sessionId',
};

/** The one empty list every record shares. Frozen: no one can add to it. */
const EMPTY: readonly never[] = Object.freeze([]);

export interface InternerOptions {
  /** Distinct strings remembered before the string cache starts over. */
  maxStrings: number;
  /** Distinct small shared objects (settings, errors, label lists) remembered before that cache starts over. */
  maxObjects: number;
  /** The stored id string equal to `id`, if that session is known, so runs share it. */
  sessionId?: (id: string) => string | undefined;
}

/** What generated copies call on the interner that runs them. */
interface Pool {
  str(s: string): string;
  session(id: string): string;
  shared<T>(key: string, copy: Copy<T>, value: T): T;
}

type Copy<T = unknown> = (value: T, pool: Pool) => T;
/** A copy of some part, as generated code refers to it. */
type AnyCopy = (value: never, pool: Pool) => unknown;
/** A part of a schema as a JavaScript expression copying the variable named `x`; `ref` names a value the code uses. */
type CopyCode = (x: string, ref: (value: unknown) => string) => string;

const copySession = deriveCopy<SessionRecord>(sessionRecordSchema);
const copyRun = deriveCopy<RunRecord>(runRecordSchema);

export class RecordInterner {
  readonly #strings = new Map<string, string>();
  readonly #objects = new Map<string, unknown>();
  readonly #pool: Pool;

  constructor(private readonly options: InternerOptions) {
    this.#pool = {
      str: (s) => this.#str(s),
      session: (id) => this.options.sessionId?.(id) ?? this.#str(id),
      shared: (key, copy, value) => this.#shared(key, copy, value),
    };
  }

  session(s: SessionRecord): SessionRecord {
    return copySession(s, this.#pool);
  }

  run(r: RunRecord): RunRecord {
    return copyRun(r, this.#pool);
  }

  #str(s: string): string {
    const known = this.#strings.get(s);
    if (known !== undefined) return known;
    // Starting over keeps the cache bounded; a string seen again is simply cached anew.
    if (this.#strings.size >= this.options.maxStrings) this.#strings.clear();
    this.#strings.set(s, s);
    return s;
  }

  /** The frozen copy of `value`, shared by every caller with the same key. */
  #shared<T>(key: string, copy: Copy<T>, value: T): T {
    const known = this.#objects.get(key);
    if (known !== undefined) return known as T;
    if (this.#objects.size >= this.options.maxObjects) this.#objects.clear();
    const made = copy(value, this.#pool);
    this.#objects.set(key, made);
    return made;
  }
}

/** The copy of values of `schema`: its definition walked once. */
function deriveCopy<T>(schema: z.ZodType<T>): Copy<T> {
  return toFunction(copyCode(schema, '')) as Copy<T>;
}

/** How a value of `schema`, found under the field `key`, is copied. */
function copyCode(schema: z.core.$ZodType, key: string): CopyCode {
  const node = nodeOf(schema);
  const def = node._zod.def;
  switch (def.type) {
    case 'string':
      if (key === KEEP.sessionRef) return (x) => `c.session(${x})`;
      return KEEP.unique.has(key) ? (x) => x : (x) => `c.str(${x})`;
    case 'number':
    case 'boolean':
    case 'null':
      return (x) => x;
    case 'literal':
    case 'enum': {
      // The schema's own string for a value it allows (validated: it is one of them).
      const own = new Map([...(node._zod.values ?? [])].map((v) => [v, v]));
      return (x, ref) => `(${ref(own)}.get(${x}) ?? ${x})`;
    }
    case 'optional': {
      const inner = copyCode(def.innerType, key);
      return (x, ref) => `(${x} === undefined ? undefined : ${inner(x, ref)})`;
    }
    case 'nullable': {
      const inner = copyCode(def.innerType, key);
      return (x, ref) => `(${x} === null ? null : ${inner(x, ref)})`;
    }
    case 'array': {
      const item = toFunction(copyCode(def.element, key));
      const list: Copy<readonly unknown[]> = (v, pool) => freezeList(v, item, pool);
      return shareable(key, list, (x) => `JSON.stringify(${x})`);
    }
    case 'object': {
      const object = objectCopy(def);
      const keys = Object.keys(def.shape);
      return shareable(key, object, (x) => `JSON.stringify([${keys.map((k) => `${x}[${quoted(k)}]`).join(', ')}])`);
    }
    default:
      // Records of any JSON, unions: a structural copy, frozen at every level.
      return (x, ref) => `${ref(deepFrozenCopy)}(${x})`;
  }
}

/** A copy by `copy`, or for a shared field the one copy kept under the key `keyOf` makes. */
function shareable(field: string, copy: AnyCopy, keyOf: (x: string) => string): CopyCode {
  if (!KEEP.shared.has(field)) return (x, ref) => `${ref(copy)}(${x}, c)`;
  return (x, ref) => `c.shared(${ref(`${field}\u0000`)} + ${keyOf(x)}, ${ref(copy)}, ${x})`;
}

/**
 * One function for an object schema: an object literal of its fields in the
 * schema's order, then each optional field that is present, then frozen.
 */
function objectCopy(def: z.core.$ZodObjectDef): AnyCopy {
  // A loose object keeps its other keys too (none of the records is loose): copied whole.
  if (def.catchall !== undefined && def.catchall._zod.def.type !== 'never') return deepFrozenCopy;
  const refs = new Refs();
  const keys = Object.keys(def.shape);
  const optional = (k: string) => nodeOf(def.shape[k]!)._zod.def.type === 'optional';
  const required = keys.filter((k) => !optional(k));
  const lines = [
    ...required.map((k, i) => `const a${i} = v[${quoted(k)}];`),
    `const o = {${required.map((k, i) => `${quoted(k)}: ${copyCode(def.shape[k]!, k)(`a${i}`, refs.ref)}`).join(', ')}};`,
    'let x;',
    ...keys.filter(optional).map((k) => `x = v[${quoted(k)}]; if (x !== undefined) o[${quoted(k)}] = ${copyCode(def.shape[k]!, k)('x', refs.ref)};`),
    'return Object.freeze(o);',
  ];
  return refs.generate(`function (v, c) {\n${lines.join('\n')}\n}`);
}

/** A copy as a function of its own. */
function toFunction(code: CopyCode): Copy {
  const refs = new Refs();
  return refs.generate(`(x, c) => (${code('x', refs.ref)})`);
}

/** A frozen copy of `list` with each item copied; the shared empty list if there are none. */
function freezeList(list: readonly unknown[], item: Copy, pool: Pool): readonly unknown[] {
  if (list.length === 0) return EMPTY;
  const out = new Array<unknown>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = item(list[i], pool);
  return Object.freeze(out);
}

/** Plain JSON data only (validated records): a structural copy, frozen at every level. */
function deepFrozenCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  const copy: unknown = Array.isArray(value) ? value.map(deepFrozenCopy) : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, deepFrozenCopy(v)]));
  return Object.freeze(copy) as T;
}
