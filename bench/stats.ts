/** The summaries every bench prints of its samples. */

/** The middle sample, or the mean of the two middle ones. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** "min–max ms" of the samples. */
export function spread(values: readonly number[]): string {
  return `${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)} ms`;
}
