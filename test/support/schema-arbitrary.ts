/**
 * Arbitrary values of a zod schema, for property tests of what is derived
 * from the record schemas (the start-up guard, the interner): derived from
 * the schema's definition too, so a field added to a schema is generated
 * with nothing written here. Values come as the state files hold them
 * (through JSON), mostly valid: each leaf keeps to its checks where they
 * are simple (lengths, bounds, integers, prefixes) and is filtered by its
 * schema otherwise; a refinement of a whole object is not, so callers that
 * want valid values only filter by the schema.
 */
import fc from 'fast-check';
import type { z } from 'zod';

/** Values of `schema` as they read back from a JSON file. */
export function arbitraryOf(schema: z.core.$ZodType): fc.Arbitrary<unknown> {
  return arbitrary(schema).map((v) => JSON.parse(JSON.stringify(v)) as unknown);
}

/** Strings that often repeat (so records share some) besides arbitrary ones. */
const text = fc.oneof(fc.constantFrom('', 'a', 'T-1', 'route-1', '2030-01-01T00:00:00.000Z', 'model-a'), fc.string({ maxLength: 12 }));

function arbitrary(schema: z.core.$ZodType): fc.Arbitrary<unknown> {
  const node = schema as z.core.$ZodTypes;
  const def = node._zod.def;
  const bounds = boundsOf(schema);
  const valid = (v: unknown) => (schema as z.ZodType).safeParse(v).success;
  switch (def.type) {
    case 'string': {
      const body =
        bounds.minLength > 0 || bounds.maxLength !== undefined
          ? fc.string({ minLength: bounds.minLength, maxLength: Math.min(bounds.maxLength ?? 12, 12 + bounds.minLength) })
          : text;
      return body.map((s) => bounds.prefix + s).filter(valid);
    }
    case 'number': {
      const { min, max } = bounds;
      if (bounds.integer) return fc.integer({ min: Math.max(min ?? -1000, -(2 ** 31)), max: Math.min(max ?? 100_000, 2 ** 31) }).filter(valid);
      return fc.double({ min: min ?? -1000, max: max ?? 1e6, noNaN: true, noDefaultInfinity: true }).filter(valid);
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'literal':
    case 'enum':
      return fc.constantFrom(...(node._zod.values ?? []));
    case 'nullable':
      return fc.option(arbitrary(def.innerType), { nil: null, freq: 3 });
    case 'optional':
      return arbitrary(def.innerType);
    case 'array':
      return fc.array(arbitrary(def.element), { minLength: bounds.minLength, maxLength: Math.min(bounds.maxLength ?? 3, 3 + bounds.minLength) });
    case 'object': {
      const keys = Object.keys(def.shape);
      const model = Object.fromEntries(keys.map((k) => [k, arbitrary(def.shape[k]!)]));
      const requiredKeys = keys.filter((k) => (def.shape[k] as z.core.$ZodTypes)._zod.def.type !== 'optional');
      return fc.record(model, { requiredKeys, noNullPrototype: true });
    }
    case 'record':
      return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3, noNullPrototype: true });
    case 'union':
      return fc.oneof(...def.options.map(arbitrary));
    case 'unknown':
    case 'any':
      return fc.jsonValue({ maxDepth: 2 });
    default:
      throw new Error(`schema-arbitrary: no arbitrary for ${def.type}`);
  }
}

interface Bounds {
  minLength: number;
  maxLength: number | undefined;
  min: number | undefined;
  max: number | undefined;
  integer: boolean;
  prefix: string;
}

/** The simple checks of a leaf, read from their definitions. */
function boundsOf(schema: z.core.$ZodType): Bounds {
  const bounds: Bounds = { minLength: 0, maxLength: undefined, min: undefined, max: undefined, integer: false, prefix: '' };
  const own = schema._zod.traits.has('$ZodCheck') ? [schema as unknown as z.core.$ZodCheck] : [];
  for (const check of [...own, ...(schema._zod.def.checks ?? [])]) {
    const def = check._zod.def as z.core.$ZodChecks['_zod']['def'];
    if (def.check === 'min_length') bounds.minLength = def.minimum;
    else if (def.check === 'max_length') bounds.maxLength = def.maximum;
    else if (def.check === 'greater_than' && typeof def.value === 'number') bounds.min = def.value;
    else if (def.check === 'less_than' && typeof def.value === 'number') bounds.max = def.value;
    else if (def.check === 'number_format') bounds.integer = def.format !== undefined && def.format.includes('int');
    else if (def.check === 'string_format' && def.format === 'starts_with') bounds.prefix = (def as z.core.$ZodCheckStartsWithDef).prefix;
  }
  return bounds;
}
