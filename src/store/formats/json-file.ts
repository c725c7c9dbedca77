/**
 * Reads one small JSON file of the state directory and validates it. A
 * missing file is `undefined`; anything unreadable is a `state_corrupt`
 * refusal that names the file and what to do.
 */
import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { errCode } from '../../util/errno.js';
import { StoreError } from '../errors.js';
import { describeIssue } from '../../shared/record-schemas.js';

export interface JsonFileCheck<T> {
  schema: z.ZodType<T>;
  /** Extra consistency check on a valid value; returns the problem, if any. */
  problemWith?(value: T): string | undefined;
  /** What the file is, for the message ("owner record", "result file"). */
  what: string;
  /** How to recover. */
  action: string;
}

export async function readJsonFile<T>(path: string, check: JsonFileCheck<T>): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  let problem: string | undefined;
  try {
    const parsed = check.schema.safeParse(JSON.parse(text));
    if (parsed.success) {
      problem = check.problemWith?.(parsed.data);
      if (problem === undefined) return parsed.data;
    } else {
      problem = describeIssue(parsed.error);
    }
  } catch (err) {
    problem = err instanceof Error ? err.message : String(err);
  }
  throw new StoreError('state_corrupt', `${check.what} ${path} is unreadable (${problem})`, check.action);
}
