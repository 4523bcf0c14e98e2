import type { Tx } from '../db/tx.ts';
import type { Clock } from '../shared/clock.ts';
import { exponentialBackoff } from './backoff.ts';
import type { JobKind, JobType } from './job-kind.ts';
import type { Queue } from './queue.ts';

/**
 * Work that runs again and again, in one process at a time (a cleanup pass, a
 * health check, a metering pass): one job for all processes, made sure of by
 * every process at start (domains hand it to `app.jobs.recur`). A run that
 * fails is tried again, first after `firstRetryMs`, then twice as long each
 * time up to the interval, and never given up; a process that dies in a run
 * leaves it to another once its lease runs out.
 */
export interface Recurring {
  type: JobType<Record<string, never>>;
  /** The time between runs: the next is due this long after a run ends, unless `run` says otherwise. */
  intervalMs: number;
  firstRetryMs: number;
  /** One run; answers when the next is due, if not one interval after this one ends. */
  run(): Promise<number | void>;
}

/** The one job of a recurring kind has this subject. */
const SUBJECT = 'all';

export function recurringKind(clock: Clock, recurring: Recurring): JobKind<Record<string, never>> {
  return {
    type: recurring.type,
    concurrency: 1,
    retryDelay: exponentialBackoff({ firstMs: recurring.firstRetryMs, maxMs: recurring.intervalMs, attempts: Infinity }),
    async perform() {
      const next = await recurring.run();
      return { status: 'later', at: next ?? clock.now() + recurring.intervalMs };
    },
  };
}

/** The job, due one interval from now if it does not exist yet. */
export async function ensureRecurring(queue: Queue, tx: Tx, clock: Clock, recurring: Recurring): Promise<void> {
  await queue.ensure(tx, recurring.type, SUBJECT, {}, clock.now() + recurring.intervalMs);
}
