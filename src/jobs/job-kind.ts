import type { Tx } from '../db/transaction.ts';

/**
 * How long a job stays leased to a process that stopped renewing it (it died,
 * or lost the database): another process takes the job over within this and
 * one poll. Short, since the lease is renewed every quarter of it while the
 * process lives, however long an attempt takes.
 */
export const DEFAULT_LEASE_MS = 8_000;

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
 * What a domain says about a kind of job: what one attempt does, how many run
 * at once, how a failure is retried. How jobs are stored, leased, claimed and
 * woken up is the jobs module's business alone.
 */
export interface JobKind<Payload> {
  readonly type: JobType<Payload>;
  /** Attempts of this kind in flight at once in one process (over all its lanes, for a laned kind). */
  readonly concurrency: number;
  /**
   * How long a process holds a job before another may take it over (its
   * lease; DEFAULT_LEASE_MS unless a test says otherwise). The runner renews
   * it while the process lives, so an attempt may take longer than a lease;
   * an attempt whose lease could not be renewed is aborted (its `signal`)
   * before the lease runs out, so that no two processes run a job at once.
   */
  readonly leaseMs?: number;
  /**
   * After the n-th consecutive failed attempt (n ≥ 1): milliseconds until the
   * next one, or null to give up. The kind's whole retry rule, applied to
   * every attempt however it failed.
   */
  retryDelay(failures: number): number | null;
  /**
   * One attempt. A throw is a failed attempt, with the error's message.
   * `signal` aborts when this process must let the job go (its lease could
   * not be renewed, or the process is stopping): an attempt that can stop
   * should, and answer as it then is (`release` hands the job back).
   */
  perform(job: Job<Payload>, signal: AbortSignal): Promise<Outcome>;
}

/**
 * A kind whose jobs have lanes (an endpoint's deliveries): what it needs
 * besides a plain kind's. Its attempts read what they need in one go, answer
 * a result of their own, are admitted lane by lane, and are recorded in the
 * domain's tables in the transaction that settles them.
 */
export interface LanedJobKind<Payload, Work, Result> extends Omit<JobKind<Payload>, 'perform'> {
  readonly laned: true;
  /** Jobs in flight per lane, and not before when (a failing lane is slowed down). */
  admit(lane: string): LaneAdmission;
  /** Turns claimed jobs into what `perform` needs, reading it in one go; null for a job whose subject is gone (it is dropped). */
  load(jobs: Job<Payload>[]): Promise<Array<Work | null>>;
  /** One attempt, as a plain kind's, with what `load` read for it (or what the enqueuer handed over). */
  perform(work: Work, job: Job<Payload>, signal: AbortSignal): Promise<Result>;
  outcomeOf(result: Result): Outcome;
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
}

/** A kind, whatever its types, as domains hand it to the jobs module (`any`: each kind's own types are checked where it is written). */
export type AnyJobKind = JobKind<any> | LanedJobKind<any, any, any>;

/** A kind as the runner runs it: a plain kind is a laned one that loads nothing, records nothing and admits by its concurrency. */
export type RunnableKind = Omit<LanedJobKind<unknown, unknown, unknown>, 'laned' | 'admit' | 'load' | 'outcomeOf'> &
  Partial<Pick<LanedJobKind<unknown, unknown, unknown>, 'admit' | 'load' | 'outcomeOf'>>;

export function runnable(kind: AnyJobKind): RunnableKind {
  if ('laned' in kind) return kind as LanedJobKind<unknown, unknown, unknown>;
  const plain = kind as JobKind<unknown>;
  return { type: plain.type, concurrency: plain.concurrency, leaseMs: plain.leaseMs, retryDelay: (failures) => plain.retryDelay(failures), perform: (_work, job, signal) => plain.perform(job, signal) };
}
