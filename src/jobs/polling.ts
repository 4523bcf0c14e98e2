import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import type { Kind } from './lanes.ts';
import { dueKinds } from './sql/dueKinds.ts';
import { dueLanes } from './sql/dueLanes.ts';

const WAKE_GRANULARITY_MS = 10;

export interface PollingDeps {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
  kinds: ReadonlyMap<string, Kind>;
  /** The database holds due jobs of this kind and lane. */
  due(kind: Kind, lane: string | null): void;
}

/** When a runner looks in the database for due jobs: when woken, when something falls due, and every interval as a safety net. */
export interface Polling {
  start(): void;
  stop(): void;
  /** Something may be due now. */
  wake(): void;
  /** Something falls due at `at`. */
  wakeAt(at: number): void;
  /** Polls now (one poll at a time; a wake meanwhile polls again after). */
  poll(): Promise<void>;
  /** Runs a wake-up that is waiting for its turn, if any, now (tests' drain); false when none was. */
  pollWoken(): Promise<boolean>;
  /** A poll under way. */
  readonly current: Promise<void> | null;
}

export function createPolling(deps: PollingDeps, pollIntervalMs: number): Polling {
  const { db, clock, logger, kinds } = deps;
  const wakes = new Map<number, Timer>();
  let started = false;
  let stopped = false;
  let polling: Promise<void> | null = null;
  let pollAgain = false;
  let pollSoon: NodeJS.Immediate | null = null;
  let pollTimer: Timer | null = null;

  function wake(): void {
    if (!started || stopped || pollSoon !== null) return;
    pollSoon = setImmediate(() => {
      pollSoon = null;
      void poll();
    });
  }

  /** Polls when `at` comes, to the nearest 10 ms. */
  function wakeAt(at: number): void {
    if (stopped) return;
    const bucket = Math.ceil(at / WAKE_GRANULARITY_MS) * WAKE_GRANULARITY_MS;
    if (wakes.has(bucket)) return;
    wakes.set(
      bucket,
      clock.setTimeout(() => {
        wakes.delete(bucket);
        wake();
      }, bucket - clock.now()),
    );
  }

  /** Finds the lanes and kinds with due jobs. */
  function poll(): Promise<void> {
    if (polling !== null) {
      pollAgain = true;
      return polling;
    }
    polling = (async () => {
      try {
        const now = clock.now();
        for (const kind of kinds.values()) {
          if (!kind.laned) continue;
          for (const name of await dueLanes(db, kind.name, now)) {
            if (stopped) return;
            deps.due(kind, name);
          }
        }
        for (const name of await dueKinds(db, now)) {
          const kind = kinds.get(name);
          if (kind !== undefined && !stopped) deps.due(kind, null);
        }
      } catch (err) {
        logger.error({ err }, 'polling for due jobs failed');
      } finally {
        polling = null;
      }
      if (pollAgain) {
        pollAgain = false;
        wake();
      }
    })();
    return polling;
  }

  return {
    start() {
      started = true;
      const tick = () => {
        void poll().finally(() => {
          if (!stopped) pollTimer = clock.setTimeout(tick, pollIntervalMs);
        });
      };
      tick();
    },
    stop() {
      stopped = true;
      pollTimer?.clear();
      if (pollSoon !== null) clearImmediate(pollSoon);
      pollSoon = null;
      for (const timer of wakes.values()) timer.clear();
      wakes.clear();
    },
    wake,
    wakeAt,
    poll,
    async pollWoken() {
      if (pollSoon === null) return false;
      clearImmediate(pollSoon);
      pollSoon = null;
      await poll();
      return true;
    },
    get current() {
      return polling;
    },
  };
}
