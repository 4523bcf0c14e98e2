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

/** Node's longest timer (about 24.8 days): a longer one would fire after 1 ms. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(callback, ms) {
    let timer: NodeJS.Timeout;
    // A wait past the longest timer goes in legs, each as long as a timer may be.
    const wait = (left: number) => {
      timer = setTimeout(() => (left > LONGEST_TIMER_MS ? wait(left - LONGEST_TIMER_MS) : callback()), Math.min(Math.max(0, left), LONGEST_TIMER_MS));
      timer.unref();
    };
    wait(ms);
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
