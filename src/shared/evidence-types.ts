/**
 * The evidence a turn leaves beside its result, in the shapes every layer
 * shares: the worker reports them, the store keeps and re-checks them, the
 * tools show them. What computes them lives in src/evidence/.
 */
import { z } from 'zod';
import { agree, type Same } from '../droid/schemas.js';

export interface ChangeSet {
  added: string[];
  modified: string[];
  deleted: string[];
  renamed: Array<{ from: string; to: string }>;
  /** Paths left out beyond the cap, over all four lists. */
  truncated: number;
  /** True when a tool call of the turn named a path outside the workspace. */
  outsideWorkspace: boolean;
}

/** True when the change set lists at least one path (or left some out). */
export function hasChanges(c: ChangeSet): boolean {
  return c.added.length + c.modified.length + c.deleted.length + c.renamed.length + c.truncated > 0;
}

/** droid.get_context_stats after the turn: tokens in the context window, its size, and used / limit. */
export interface ContextStats {
  used: number;
  limit: number;
  fraction: number;
}

/** One destination the turn's egress proxy refused (sandbox/egress/proxy.ts): how often, since when, and why. */
export interface RefusedDestination {
  host: string;
  port: number;
  count: number;
  /** ISO time of the first refusal. */
  firstAt: string;
  why: string;
}

/** What the turn's proxy refused: at most 32 destinations listed, the rest counted. */
export interface EgressEvidence {
  refused: RefusedDestination[];
  othersRefused: number;
}

/** Evidence shapes, also checked when the store reads them back (shared/record-schemas.ts). */
export const changeSet = z
  .object({
    added: z.array(z.string()),
    modified: z.array(z.string()),
    deleted: z.array(z.string()),
    renamed: z.array(z.object({ from: z.string(), to: z.string() }).strict()),
    truncated: z.number().int().nonnegative(),
    outsideWorkspace: z.boolean(),
  })
  .strict();

const count = z.number().finite().nonnegative();
export const contextStats = z.object({ used: count, limit: count, fraction: count }).strict();

export const egressEvidence = z
  .object({
    refused: z
      .array(
        z
          .object({
            host: z.string().min(1).max(300),
            port: z.number().int().min(1).max(65535),
            count: z.number().int().positive(),
            firstAt: z.string(),
            why: z.string().max(1000),
          })
          .strict(),
      )
      .max(32),
    othersRefused: z.number().int().nonnegative(),
  })
  .strict();

agree<Same<z.infer<typeof changeSet>, ChangeSet>>();
agree<Same<z.infer<typeof egressEvidence>, EgressEvidence>>();
agree<Same<z.infer<typeof contextStats>, ContextStats>>();
