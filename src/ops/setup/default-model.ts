/**
 * Which live-catalog model a host default may be, and which one `init`
 * writes when not told: pure, over the catalog doctor and init read.
 */
import { looksFast } from '../../config/schema.js';
import type { CatalogModel } from '../../droid/client.js';

/** The reference host's default (spec of record, "Reference host setup"), used when the live catalog has it. */
const REFERENCE_MODEL = 'claude-opus-5-5';

/** Models a host default may be: not a Fast variant by id or display name (the loader's and launch's rule). */
export function standardModels(catalog: readonly CatalogModel[]): CatalogModel[] {
  return catalog.filter((m) => !looksFast(m.id) && !looksFast(m.displayName ?? ''));
}

/**
 * The default init writes: the reference model if the catalog has it, else
 * the first standard Claude Opus in droid's own order (the newest), else the
 * first standard model; undefined for a catalog without one.
 */
export function suggestedDefault(catalog: readonly CatalogModel[]): string | undefined {
  const standard = standardModels(catalog);
  return (standard.find((m) => m.id === REFERENCE_MODEL) ?? standard.find((m) => m.id.startsWith('claude-opus-')) ?? standard[0])?.id;
}

/** Every standard id, in the catalog's order: the whole list, never cut off (an operator picks from it). */
export function choices(catalog: readonly CatalogModel[]): string {
  const ids = standardModels(catalog).map((m) => m.id);
  return ids.length > 0 ? ids.join(', ') : '(the live catalog has no standard model)';
}
