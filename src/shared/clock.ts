/** Milliseconds since the epoch. Injected so tests can move time instead of sleeping. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

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
