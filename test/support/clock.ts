import type { Clock } from '../../src/shared/clock.ts';

export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(epochMs: number): void;
}

/** Time that moves only when a test moves it. */
export function manualClock(start = Date.UTC(2026, 10, 22, 10, 0, 0)): ManualClock {
  let current = start;
  return {
    now: () => current,
    advance: (ms) => {
      current += ms;
    },
    set: (epochMs) => {
      current = epochMs;
    },
  };
}
