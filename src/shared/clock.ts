/** A pending callback of a Clock; `clear` is harmless once it has fired. */
export interface Timer {
  clear(): void;
}

/**
 * Time, injected so that tests move it instead of sleeping: `now()` in epoch
 * milliseconds, and timers that fire when the clock reaches their time (on
 * the system clock, real timers that never keep the process alive). Background
 * work schedules itself with these; I/O deadlines (an HTTP attempt's timeout)
 * stay on real time.
 */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(callback, ms) {
    const timer = setTimeout(callback, Math.max(0, ms));
    timer.unref();
    return { clear: () => clearTimeout(timer) };
  },
};

export function toIso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

export function toIsoOrNull(epochMs: number | null): string | null {
  return epochMs === null ? null : toIso(epochMs);
}

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
