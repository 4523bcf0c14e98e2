import type { Kysely } from 'kysely';
import type { AnyRows } from '../db/batch.ts';
import type { DB } from '../db/database.ts';
import type { Tx } from '../db/transaction.ts';
import type { Clock } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { announce, type Signals } from '../db/signals.ts';
import type { Job, JobType } from './job-kind.ts';
import type { LanedJobType } from './laned-kind.ts';
import type { JobsTable } from './jobs.tables.ts';
import type { Runner } from './runner.ts';
import { cancelKeyedJob } from './sql/cancelKeyedJob.ts';
import { ensureKeyedJob } from './sql/ensureKeyedJob.ts';
import { countJobs } from './sql/countJobs.ts';
import { countLaneJobs } from './sql/countLaneJobs.ts';
import { insertJobs } from './sql/insertJobs.ts';
import { closeLane, openLane, setLanePaused } from './sql/lanes.ts';
import { scheduleKeyedJob } from './sql/scheduleKeyedJob.ts';

export interface NewJob<Payload> {
  payload: Payload;
  /** Default: now. */
  runAt?: number;
}

export interface NewLanedJob<Payload, Work> {
  /**
   * The job's id, when its subject has one job at a time and an id of its own
   * (a delivery's attempt series is its delivery); by default a new `job_` id.
   */
  id?: string;
  lane: string;
  payload: Payload;
  /** Default: now. */
  runAt?: number;
  /** What an attempt needs, when the enqueuer has it already: a job this process starts at once then needs no reading. */
  work?: Work;
}

export interface LanedEnqueueOptions {
  /** Domain rows written by the same statement as the jobs, where the engine allows (an event and its deliveries). */
  alongside?: readonly AnyRows[];
  /**
   * The caller has just read the jobs' lanes open (their owners enabled):
   * those this process can start at once are leased to it as written, as
   * plain jobs are. The kind must check its lane's owner again before an
   * attempt (a pause may commit first), as the delivery job does.
   */
  lanesOpen?: boolean;
}

/**
 * What domains do with background work, always inside their own
 * transaction, so the work exists if and only if the change that calls for
 * it does. Nothing here says how jobs are leased or run.
 */
export interface Queue {
  /**
   * New jobs of a plain kind. Those due now that this process can start at
   * once are leased to it and handed over after commit; the rest are
   * announced to every process.
   */
  enqueue<Payload>(tx: Tx, type: JobType<Payload>, jobs: ReadonlyArray<NewJob<Payload>>): Promise<void>;
  /**
   * New jobs of a laned kind, each in its lane. They wait for their lane
   * (which may be paused) and are announced to every process, unless the
   * caller says the lanes are open: then those this process can start at
   * once are leased to it and handed over after commit, with their `work`.
   */
  enqueueInLane<Payload, Work>(tx: Tx, type: LanedJobType<Payload, Work>, jobs: ReadonlyArray<NewLanedJob<Payload, Work>>, options?: LanedEnqueueOptions): Promise<void>;
  /** The one job of this type for `subject` (a machine's check, a schedule's tick), due at `runAt`: created, or moved there. */
  schedule<Payload>(tx: Tx, type: JobType<Payload>, subject: string, payload: Payload, runAt: number): Promise<void>;
  /** The one job of this type for `subject`, due at `runAt` if it does not exist yet (a recurring job, ensured at start). */
  ensure<Payload>(tx: Tx, type: JobType<Payload>, subject: string, payload: Payload, runAt: number): Promise<void>;
  /** Removes the job of this type for `subject`, if any. */
  cancel<Payload>(tx: Tx, type: JobType<Payload>, subject: string): Promise<void>;
  /** A lane holds jobs of a laned kind that are claimed and paused together; closing it cancels them. */
  openLane(tx: Tx, lane: string, options: { paused: boolean }): Promise<void>;
  pauseLane(tx: Tx, lane: string): Promise<void>;
  resumeLane(tx: Tx, lane: string): Promise<void>;
  closeLane(tx: Tx, lane: string): Promise<void>;
  /** Jobs of this type that exist (for metrics). */
  count(type: JobType<unknown> | LanedJobType<unknown, unknown>): Promise<number>;
  /** Jobs in a lane, counted up to `cap` (how full it is, for work that feeds it in batches). */
  countInLane(lane: string, cap: number): Promise<number>;
}

export interface QueueDeps {
  db: Kysely<DB>;
  clock: Clock;
  signals: Signals;
  /**
   * This process's runner, when its role runs jobs: jobs due now that it can
   * start at once are leased to it by the insert that creates them and handed
   * over in memory on commit, instead of being claimed by a poll.
   */
  runner: Runner | null;
}

const keyOf = (type: JobType<unknown>, subject: string) => `${type.name}:${subject}`;

/** A new job's row, not leased yet. */
function newRow(kind: string, id: string, lane: string | null, payload: unknown, runAt: number, now: number): JobsTable {
  return { id, kind, lane, key: null, payload: JSON.stringify(payload), run_at: runAt, attempts: 0, locked_by: null, locked_until: null, last_error: null, created_at: now };
}

function keyedRow<Payload>(type: JobType<Payload>, subject: string, payload: Payload, runAt: number, now: number): JobsTable {
  return { ...newRow(type.name, newId('job', now), null, payload, runAt, now), key: keyOf(type, subject) };
}

export function createQueue({ db, clock, signals, runner }: QueueDeps): Queue {
  /** After commit: this process polls at `at`; now, every process is told (on PostgreSQL by NOTIFY, which is delivered only on commit). */
  async function dueAt(tx: Tx, at: number): Promise<void> {
    if (at <= clock.now()) return announce(signals, tx, 'due');
    if (runner !== null) tx.afterCommit(() => runner.wakeAt(at));
  }

  /** This process's runner, if it runs jobs of this kind. */
  function localRunner(kind: string): Runner | null {
    return runner !== null && runner.isRegistered(kind) ? runner : null;
  }

  /**
   * Writes new jobs (with `alongside`, in one statement where the engine
   * allows). Those due now that `local` can start at once are written leased
   * to it and handed over after commit; the rest are announced: due now to
   * every process, due later to this one's timer.
   */
  async function write(tx: Tx, kind: string, local: Runner | null, now: number, specs: Array<{ row: JobsTable; payload: unknown; work?: unknown }>, alongside?: readonly AnyRows[]): Promise<void> {
    const leaseUntil = local === null ? 0 : now + local.leaseMs(kind);
    const handed: Array<{ job: Job<unknown>; work?: unknown }> = [];
    let firstLater = Infinity;
    let unannounced = false;
    for (const { row, payload, work } of specs) {
      if (local !== null && row.run_at <= now && local.accepts(kind, row.lane)) {
        row.locked_by = local.id;
        row.locked_until = leaseUntil;
        const job: Job<unknown> = { id: row.id, kind, lane: row.lane, key: null, payload, attempts: 0, runAt: row.run_at, leaseUntil };
        handed.push(work === undefined ? { job } : { job, work });
      } else if (row.run_at <= now) unannounced = true;
      else firstLater = Math.min(firstLater, row.run_at);
    }
    await insertJobs(tx.db, specs.map(({ row }) => row), alongside);
    if (unannounced) await announce(signals, tx, 'due');
    if (firstLater !== Infinity) await dueAt(tx, firstLater);
    if (handed.length > 0) tx.afterCommit(() => local!.handover(kind, handed));
  }

  return {
    async enqueue(tx, type, jobs) {
      const now = clock.now();
      await write(tx, type.name, localRunner(type.name), now, jobs.map(({ payload, runAt = now }) => ({ row: newRow(type.name, newId('job', now), null, payload, runAt, now), payload })));
    },
    async enqueueInLane(tx, type, jobs, options = {}) {
      const now = clock.now();
      // A lane not read open may be paused: its jobs are not leased here, but left to a claim, which checks it.
      const local = options.lanesOpen === true ? localRunner(type.name) : null;
      const specs = jobs.map(({ id, lane, payload, runAt = now, work }) => ({ row: newRow(type.name, id ?? newId('job', now), lane, payload, runAt, now), payload, work }));
      await write(tx, type.name, local, now, specs, options.alongside);
    },
    async schedule(tx, type, subject, payload, runAt) {
      await scheduleKeyedJob(tx.db, keyedRow(type, subject, payload, runAt, clock.now()));
      await dueAt(tx, runAt);
    },
    async ensure(tx, type, subject, payload, runAt) {
      await ensureKeyedJob(tx.db, keyedRow(type, subject, payload, runAt, clock.now()));
      await dueAt(tx, runAt);
    },
    async cancel(tx, type, subject) {
      await cancelKeyedJob(tx.db, keyOf(type, subject));
    },
    async openLane(tx, lane, { paused }) {
      await openLane(tx.db, lane, paused);
    },
    async pauseLane(tx, lane) {
      await setLanePaused(tx.db, lane, true);
    },
    async resumeLane(tx, lane) {
      await setLanePaused(tx.db, lane, false);
      await announce(signals, tx, 'due');
    },
    async closeLane(tx, lane) {
      await closeLane(tx.db, lane);
    },
    count: (type) => countJobs(db, type.name),
    countInLane: (lane, cap) => countLaneJobs(db, lane, cap),
  };
}
