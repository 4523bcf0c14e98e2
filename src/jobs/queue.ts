import type { Kysely } from 'kysely';
import type { AnyRows } from '../db/batch.ts';
import type { DB } from '../db/database.ts';
import type { Tx } from '../db/transaction.ts';
import type { Clock } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { announce, type Signals } from '../db/signals.ts';
import type { Job, JobType } from './job-kind.ts';
import type { JobsTable } from './jobs.tables.ts';
import type { Runner } from './runner.ts';
import { cancelKeyedJob } from './sql/cancelKeyedJob.ts';
import { ensureKeyedJob } from './sql/ensureKeyedJob.ts';
import { countJobs } from './sql/countJobs.ts';
import { countLaneJobs } from './sql/countLaneJobs.ts';
import { insertJobs } from './sql/insertJobs.ts';
import { closeLane, openLane, setLanePaused } from './sql/lanes.ts';
import { scheduleKeyedJob } from './sql/scheduleKeyedJob.ts';

export interface NewJob<Payload, Work> {
  /**
   * The job's id, when its subject has one job at a time and an id of its own
   * (a delivery's attempt series is its delivery); by default a new `job_` id.
   */
  id?: string;
  payload: Payload;
  lane?: string;
  /** Default: now. */
  runAt?: number;
  /** What an attempt needs, when the enqueuer has it already: a job this process starts at once then needs no reading. */
  work?: Work;
}

export interface EnqueueOptions {
  /** Domain rows written by the same statement as the jobs, where the engine allows (an event and its deliveries). */
  alongside?: readonly AnyRows[];
  /**
   * The caller has just read the jobs' lanes open (their owners enabled):
   * those this process can start at once are leased to it as written, as jobs
   * without a lane are. The kind must check its lane's owner again before an
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
   * New jobs. Those due now, without a lane, that this process can start at
   * once are leased to it and handed over after commit; the rest are
   * announced to every process (a lane's jobs wait for their lane, which may
   * be paused, unless the caller says it is open).
   */
  enqueue<Payload, Work>(tx: Tx, type: JobType<Payload>, jobs: ReadonlyArray<NewJob<Payload, Work>>, options?: EnqueueOptions): Promise<void>;
  /** The one job of this type for `subject` (a machine's check, a schedule's tick), due at `runAt`: created, or moved there. */
  schedule<Payload>(tx: Tx, type: JobType<Payload>, subject: string, payload: Payload, runAt: number): Promise<void>;
  /** The one job of this type for `subject`, due at `runAt` if it does not exist yet (a recurring job, ensured at start). */
  ensure<Payload>(tx: Tx, type: JobType<Payload>, subject: string, payload: Payload, runAt: number): Promise<void>;
  /** Removes the job of this type for `subject`, if any. */
  cancel<Payload>(tx: Tx, type: JobType<Payload>, subject: string): Promise<void>;
  /** A lane holds jobs that are claimed and paused together; closing it cancels them. */
  openLane(tx: Tx, lane: string, options: { paused: boolean }): Promise<void>;
  pauseLane(tx: Tx, lane: string): Promise<void>;
  resumeLane(tx: Tx, lane: string): Promise<void>;
  closeLane(tx: Tx, lane: string): Promise<void>;
  /** Jobs of this type that exist (for metrics). */
  count<Payload>(type: JobType<Payload>): Promise<number>;
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

function keyedRow<Payload>(type: JobType<Payload>, subject: string, payload: Payload, runAt: number, now: number): JobsTable {
  return {
    id: newId('job', now),
    kind: type.name,
    lane: null,
    key: keyOf(type, subject),
    payload: JSON.stringify(payload),
    run_at: runAt,
    attempts: 0,
    locked_by: null,
    locked_until: null,
    last_error: null,
    created_at: now,
  };
}

export function createQueue({ db, clock, signals, runner }: QueueDeps): Queue {
  /** After commit: this process polls at `at`; now, every process is told (on PostgreSQL by NOTIFY, which is delivered only on commit). */
  async function dueAt(tx: Tx, at: number): Promise<void> {
    if (at <= clock.now()) return announce(signals, tx, 'due');
    if (runner !== null) tx.afterCommit(() => runner.wakeAt(at));
  }

  return {
    async enqueue(tx, type, jobs, options = {}) {
      const now = clock.now();
      const local = runner !== null && runner.isRegistered(type.name) ? runner : null;
      const leaseUntil = local === null ? 0 : now + local.leaseMs(type.name);
      const rows: JobsTable[] = [];
      const handed: Array<{ job: Job<unknown>; work?: unknown }> = [];
      let firstLater = Infinity;
      let unannounced = false;
      for (const spec of jobs) {
        const runAt = spec.runAt ?? now;
        const lane = spec.lane ?? null;
        const leased = local !== null && runAt <= now && (lane === null || options.lanesOpen === true) && local.accepts(type.name, lane);
        const row: JobsTable = {
          id: spec.id ?? newId('job', now),
          kind: type.name,
          lane,
          key: null,
          payload: JSON.stringify(spec.payload),
          run_at: runAt,
          attempts: 0,
          locked_by: leased ? local.id : null,
          locked_until: leased ? leaseUntil : null,
          last_error: null,
          created_at: now,
        };
        rows.push(row);
        if (leased) {
          const job: Job<unknown> = { id: row.id, kind: row.kind, lane, key: null, payload: spec.payload, attempts: 0, runAt, leaseUntil };
          handed.push(spec.work === undefined ? { job } : { job, work: spec.work });
        } else if (runAt <= now) unannounced = true;
        else firstLater = Math.min(firstLater, runAt);
      }
      await insertJobs(tx.db, rows, options.alongside);
      if (unannounced) await announce(signals, tx, 'due');
      if (firstLater !== Infinity) await dueAt(tx, firstLater);
      if (handed.length > 0) tx.afterCommit(() => local!.handover(type.name, handed));
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
