import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/connect.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Job, JobKind, Outcome, Settlement } from './job-kind.ts';
import type { Attempt, LanedJob, LanedJobKind } from './laned-kind.ts';
import { completeJobs } from './sql/completeJobs.ts';
import { rescheduleJobs } from './sql/rescheduleJobs.ts';
import { returnJobs } from './sql/returnJobs.ts';

/** An attempt waiting for its settlement to be written. */
export interface Ended {
  job: Job<unknown>;
  settlement: Settlement;
  /** When the attempt ended. */
  at: number;
  /** A laned kind's attempt: its kind locks and records it in the settling transaction. */
  laned?: {
    kind: LanedJobKind<unknown, unknown, unknown>;
    result: unknown;
    /** False when the attempt threw: the job is settled, but there is no result to record. */
    hasResult: boolean;
  };
}

/** The kind's retry policy, applied: the one place a failure becomes a retry or the end. */
export function settlementOf(kind: Pick<JobKind<unknown>, 'retryDelay'>, job: Job<unknown>, outcome: Outcome, at: number): Settlement {
  if (outcome.status !== 'failed') return outcome;
  const delay = kind.retryDelay(job.attempts + 1);
  if (delay === null) return { status: 'gave_up', error: outcome.error };
  return { status: 'retry', error: outcome.error, at: at + delay };
}

/** When the job falls due again in the queue, if it stays there. */
export function dueAgainAt(settlement: Settlement): number | undefined {
  return settlement.status === 'done' || settlement.status === 'gave_up' ? undefined : settlement.at;
}

export interface SettlementDeps {
  database: Database;
  logger: FastifyBaseLogger;
  runnerId: string;
  /** The job is no longer this runner's to renew: its settlement is written, or could not be (then it is attempted again). */
  letGo(jobId: string): void;
}

export interface Settlements {
  /** Written a few milliseconds after the first of a batch, together. */
  queue(ended: Ended): void;
  /** Written now, then let go. */
  write(batch: Ended[]): Promise<void>;
  /** Every queued settlement written (or given up on). */
  written(): Promise<void>;
}

/**
 * Settlements are written a few milliseconds after the first of a batch,
 * together: the work is done already, only its record waits (and a crash
 * meanwhile means another attempt, never a lost job).
 */
export function createSettlements(deps: SettlementDeps, batchMs: number): Settlements {
  const { database, logger, runnerId } = deps;
  let queued: Ended[] = [];
  let writing: Promise<void> | null = null;

  async function writeSoon(): Promise<void> {
    await new Promise<void>((resolve) => setTimeout(resolve, batchMs));
    while (queued.length > 0) {
      const batch = queued;
      queued = [];
      await writeAndLetGo(batch);
    }
    writing = null;
  }

  /** Writes the batch's settlements, then lets its jobs go from this runner's hold, written or not (a job not written is attempted again). */
  async function writeAndLetGo(batch: Ended[]): Promise<void> {
    try {
      await writeTogetherOrEachAlone(batch);
    } finally {
      for (const { job } of batch) deps.letGo(job.id);
    }
  }

  /** One transaction for the batch; if it fails, each on its own, so one that cannot be written does not sink the rest. */
  async function writeTogetherOrEachAlone(batch: Ended[]): Promise<void> {
    try {
      return await writeInOneTransaction(database, runnerId, batch);
    } catch (err) {
      if (batch.length === 1) return void logger.error({ err, jobId: batch[0]!.job.id }, 'could not settle a job; it will be attempted again');
      logger.warn({ err, count: batch.length }, 'could not settle a batch of jobs; settling them one by one');
    }
    for (const ended of batch) {
      try {
        await writeInOneTransaction(database, runnerId, [ended]);
      } catch (err) {
        logger.error({ err, jobId: ended.job.id }, 'could not settle a job; it will be attempted again');
      }
    }
  }

  return {
    queue(ended) {
      queued.push(ended);
      writing ??= writeSoon();
    },
    write: writeAndLetGo,
    async written() {
      while (writing !== null) await writing;
    },
  };
}

/** The jobs' new states and, for the jobs this runner still held, the kinds' own records of their attempts: all or nothing. */
async function writeInOneTransaction(database: Database, runnerId: string, batch: Ended[]): Promise<void> {
  await inTransaction(database, async (tx) => {
    const finished: string[] = [];
    const rescheduled: Array<{ id: string; run_at: number; attempts: number; last_error: string | null }> = [];
    const released: string[] = [];
    for (const { job, settlement } of batch) {
      if (settlement.status === 'done' || settlement.status === 'gave_up') finished.push(job.id);
      else if (settlement.status === 'retry') rescheduled.push({ id: job.id, run_at: settlement.at, attempts: job.attempts + 1, last_error: settlement.error });
      else if (settlement.status === 'later') rescheduled.push({ id: job.id, run_at: settlement.at, attempts: 0, last_error: null });
      else if (settlement.at !== undefined) rescheduled.push({ id: job.id, run_at: settlement.at, attempts: job.attempts, last_error: null });
      else released.push(job.id);
    }
    for (const [kind, attempts] of lanedAttemptsByKind(batch, (_, laned) => laned.kind.lockBeforeSettling !== undefined)) await kind.lockBeforeSettling!(tx, attempts);
    const held = new Set([...(await completeJobs(tx.db, runnerId, finished)), ...(await rescheduleJobs(tx.db, runnerId, rescheduled))]);
    await returnJobs(tx.db, runnerId, released);
    const recorded = lanedAttemptsByKind(batch, ({ job }, laned) => laned.hasResult && held.has(job.id) && laned.kind.record !== undefined);
    for (const [kind, attempts] of recorded) await kind.record!(tx, attempts);
  });
}

/** The batch's attempts of laned kinds that `include` takes, by kind, as the kinds see them. */
function lanedAttemptsByKind(batch: Ended[], include: (ended: Ended, laned: NonNullable<Ended['laned']>) => boolean) {
  const byKind = new Map<LanedJobKind<unknown, unknown, unknown>, Array<Attempt<unknown, unknown>>>();
  for (const ended of batch) {
    const { laned } = ended;
    if (laned === undefined || !include(ended, laned)) continue;
    const attempts = byKind.get(laned.kind) ?? [];
    attempts.push({ job: ended.job as LanedJob<unknown>, result: laned.result, settlement: ended.settlement, at: ended.at });
    byKind.set(laned.kind, attempts);
  }
  return byKind;
}
