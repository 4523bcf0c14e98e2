/**
 * A retry policy that doubles: `firstMs` after the first failure, twice that
 * after the second…, never more than `maxMs`; null (give up) once `attempts`
 * attempts have failed.
 */
export function exponentialBackoff(options: { firstMs: number; maxMs: number; attempts: number }): (failures: number) => number | null {
  return (failures) => (failures >= options.attempts ? null : Math.min(options.firstMs * 2 ** Math.max(0, failures - 1), options.maxMs));
}
