/**
 * The evidence a turn leaves beside its result, in the shapes every layer
 * shares: the worker reports them, the store keeps and re-checks them, the
 * tools show them. What computes them lives in src/evidence/. Each is
 * described once: the schema, which the store also re-checks on reading
 * (shared/record-schemas.ts), and its inferred type.
 */
import { z } from 'zod';

/** The files a turn changed (evidence/change-set.ts). */
export const changeSet = z
  .object({
    added: z.array(z.string()),
    modified: z.array(z.string()),
    deleted: z.array(z.string()),
    renamed: z.array(z.object({ from: z.string(), to: z.string() }).strict()),
    /** Paths left out beyond the cap, over all four lists. */
    truncated: z.number().int().nonnegative(),
    /** True when a tool call of the turn named a path outside the workspace. */
    outsideWorkspace: z.boolean(),
  })
  .strict();
export type ChangeSet = z.infer<typeof changeSet>;

/** True when the change set lists at least one path (or left some out). */
export function hasChanges(c: ChangeSet): boolean {
  return c.added.length + c.modified.length + c.deleted.length + c.renamed.length + c.truncated > 0;
}

const count = z.number().finite().nonnegative();
/** droid.get_context_stats after the turn: tokens in the context window, its size, and used / limit. */
export const contextStats = z.object({ used: count, limit: count, fraction: count }).strict();
export type ContextStats = z.infer<typeof contextStats>;

/** What the turn's proxy refused: at most 32 destinations listed, the rest counted. */
export const egressEvidence = z
  .object({
    /** One destination the turn's egress proxy refused (sandbox/egress/proxy.ts): how often, since when, and why. */
    refused: z
      .array(
        z
          .object({
            host: z.string().min(1).max(300),
            port: z.number().int().min(1).max(65535),
            count: z.number().int().positive(),
            /** ISO time of the first refusal. */
            firstAt: z.string(),
            why: z.string().max(1000),
          })
          .strict(),
      )
      .max(32),
    othersRefused: z.number().int().nonnegative(),
  })
  .strict();
export type EgressEvidence = z.infer<typeof egressEvidence>;
