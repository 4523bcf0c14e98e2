import type { Clock, Timer } from '../../src/shared/clock.ts';

export interface ManualClock extends Clock {
  /** Moves time forward, firing every timer that falls due on the way, in time order. */
  advance(ms: number): void;
  set(epochMs: number): void;
  /** Timers waiting to fire (for tests of the clock's own users). */
  pending(): number;
}

interface Pending {
  at: number;
  seq: number;
  callback: () => void;
}

/** Time that moves only when a test moves it; its timers fire as it passes their time. */
export function manualClock(start = Date.UTC(2026, 10, 22, 10, 0, 0)): ManualClock {
  let current = start;
  let seq = 0;
  const timers = new Set<Pending>();
  const fireDue = () => {
    for (;;) {
      let next: Pending | undefined;
      for (const timer of timers) if (timer.at <= current && (next === undefined || timer.at < next.at || (timer.at === next.at && timer.seq < next.seq))) next = timer;
      if (next === undefined) return;
      timers.delete(next);
      next.callback();
    }
  };
  return {
    now: () => current,
    setTimeout(callback, ms): Timer {
      const timer = { at: current + Math.max(0, ms), seq: seq++, callback };
      timers.add(timer);
      // A timer already due fires on the next turn, as a real one would, never inside the caller.
      if (timer.at <= current) setImmediate(fireDue);
      return { clear: () => void timers.delete(timer) };
    },
    advance(ms) {
      current += ms;
      fireDue();
    },
    set(epochMs) {
      current = epochMs;
      fireDue();
    },
    pending: () => timers.size,
  };
}
