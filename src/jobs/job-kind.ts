import type { Tx } from '../db/transaction.ts';

/** A kind of job as code names it: the name it is stored under, and the type of its payload. */
export interface JobType<Payload> {
  readonly name: string;
  /** Never set: carries the payload type. */
  readonly payload?: Payload;
}

export function jobType<Payload>(name: string): JobType<Payload> {
  return { name };
}

/** A job as a runner holds it, under its lease. */
export interface Job<Payload> {
  id: string;
  kind: string;
  lane: string | null;
  key: string | null;
  payload: Payload;
  /** Consecutive failed attempts before this one. */
  attempts: number;
  runAt: number;
  leaseUntil: number;
}

/** What became of one attempt, as the kind sees it. */
export type Outcome =
  | { status: 'done' }
  | { status: 'failed'; error: string }
  /** Not a failure: run it again at `at` (recurring work, or work that waits for something). */
  | { status: 'later'; at: number }
  /** Not attempted: back to the queue, due as it was or at `at`, its attempts as they were (its lane was paused meanwhile, say). */
  | { status: 'release'; at?: number };

/** The outcome as the queue applies it: a failure becomes a retry or the end, by the kind's retry policy. */
export type Settlement =
  | { status: 'done' }
  | { status: 'retry'; error: string; at: number }
  | { status: 'gave_up'; error: string }
  | { status: 'later'; at: number }
  | { status: 'release'; at?: number };

/** One attempt, settled: what the kind records in its own tables, in the transaction that settles the job. */
export interface Attempt<Payload, Result> {
  job: Job<Payload>;
  result: Result;
  settlement: Settlement;
  /** When the attempt ended. */
  at: number;
}

/** How many of a lane's jobs may run at once in this process, how many more it holds ready in memory, and not before when. */
export interface LaneAdmission {
  limit: number;
  hold: number;
  notBefore: number;
}

/**
 * What a domain says about a kind of job: what one attempt does and how a
 * failure is retried. How jobs are stored, leased, claimed and woken up is
 * the jobs module's business alone.
 */
export interface JobKind<Payload, Work = Job<Payload>, Result = Outcome> {
  readonly type: JobType<Payload>;
  /** Attempts of this kind in flight at once in one process, over all its lanes. */
  readonly concurrency: number;
  /**
   * How long a process holds a job before another may take it over (its
   * lease): renewed while the process lives, and at least half of it left
   * when an attempt starts. An attempt should end within half a lease, so that
   * it ends before any other process could start the same job.
   */
  readonly leaseMs: number;
  /**
   * After the n-th consecutive failed attempt (n ≥ 1): milliseconds until the
   * next one, or null to give up. The kind's whole retry rule, applied to
   * every attempt however it failed.
   */
  retryDelay(failures: number): number | null;
  /** Turns claimed jobs into what `perform` needs, reading it in one go; null for a job whose subject is gone (it is dropped). */
  load?(jobs: Job<Payload>[]): Promise<Array<Work | null>>;
  /** One attempt. A throw is a failed attempt, with the error's message. */
  perform(work: Work, job: Job<Payload>): Promise<Result>;
  /** The outcome of a result; by default the result is the outcome. */
  outcomeOf?(result: Result): Outcome;
  /**
   * Runs first in the transaction that settles attempts of this kind, before
   * their jobs are touched, with every attempt of the batch (held or not): it
   * locks the rows that other transactions lock before a lane's jobs (the
   * lane's owner, whose delete takes its jobs with it), so that every
   * transaction takes its locks in the same order and none can deadlock.
   */
  lockBeforeSettling?(tx: Tx, attempts: Array<Attempt<Payload, Result>>): Promise<void>;
  /** Records attempts in the domain's tables, in the transaction that settles their jobs; only jobs this process still held are passed. */
  record?(tx: Tx, attempts: Array<Attempt<Payload, Result>>): Promise<void>;
  /** For kinds whose jobs have lanes: jobs in flight per lane, and not before when (a failing lane is slowed down). */
  admit?(lane: string): LaneAdmission;
}

/** A kind, whatever its types, as the runner keeps it (methods take their parameters bivariantly, so any kind fits). */
export type AnyJobKind = JobKind<unknown, unknown, unknown>;
