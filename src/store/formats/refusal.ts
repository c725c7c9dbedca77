/**
 * How reading the state refuses: a `state_corrupt` error that says where and
 * what, and that nothing was changed. Loading (load.ts, load-snapshot.ts)
 * and the journal reader (journal.ts) word every refusal through these.
 */
import type { z } from 'zod';
import { StoreError } from '../errors.js';
import { describeIssue } from '../../shared/record-schemas.js';

/** Makes the error that refuses a state, from what is wrong and where. */
export type Refuse = (problem: string) => StoreError;

/** The refusal of a damaged state in `dir`: nothing was changed; restore it or move it aside. */
export function refuser(dir: string): Refuse {
  return (problem) =>
    new StoreError(
      'state_corrupt',
      problem,
      `Nothing was changed. Restore ${dir} from a backup, or move it aside (mv ${dir} ${dir}.broken) ` +
        `and start with empty state; the old records stay readable there`,
    );
}

/**
 * `value` as a `T`, or a refusal worded from the schema. `fast` answers yes only
 * for values the schema accepts unchanged (see record-guard.ts); on no, the
 * schema decides.
 */
export function validate<T>(schema: z.ZodType<T>, value: unknown, where: string, refuse: Refuse, fast?: (v: unknown) => v is T): T {
  if (fast?.(value)) return value;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const id = typeof value === 'object' && value !== null && 'id' in value ? ` (id ${JSON.stringify(value.id)})` : '';
  throw refuse(`${where}${id} is not a valid record: ${describeIssue(parsed.error)}`);
}

export function parseJson(text: string, refuse: (problem: string) => StoreError): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw refuse(err instanceof Error ? err.message : String(err));
  }
}
