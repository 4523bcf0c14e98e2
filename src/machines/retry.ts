import { MINUTE, SECOND } from '../shared/clock.ts';

const FIRST_RETRY_MS = 5 * SECOND;
const LONGEST_RETRY_MS = 5 * MINUTE;

/**
 * How long the worker leaves an item alone after its `failures`-th
 * consecutive failure (1, 2, …): 5 s doubling, at most 5 minutes, so that a
 * host failing for one machine, schedule or pool is asked again soon but
 * never crowds out the others.
 */
export function retryDelayMs(failures: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, failures - 1), LONGEST_RETRY_MS);
}
