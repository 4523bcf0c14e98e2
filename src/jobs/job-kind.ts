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
  /** Never set: a laned kind's type (laned-kind.ts) is not one, so its jobs cannot be enqueued as plain ones. */
  readonly laned?: false;
}

export function jobType<Payload>(name: string): JobType<Payload> {
  return { name };
}

/** A job as a runner holds it, under its lease. */
export interface Job<Payload> {
  id: string;
  kind: string;
  /** Null but for a laned kind's jobs (laned-kind.ts). */
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
  /** Not attempted: back to the queue, due as it was or at `at`, its attempts as they were (what it waits for is not there yet, say). */
  | { status: 'release'; at?: number };

/** The outcome as the queue applies it: a failure becomes a retry or the end, by the kind's retry policy. */
export type Settlement =
  | { status: 'done' }
  | { status: 'retry'; error: string; at: number }
  | { status: 'gave_up'; error: string }
  | { status: 'later'; at: number }
  | { status: 'release'; at?: number };

/**
 * What a domain says about a kind of job: what one attempt does, how many run
 * at once, how a failure is retried. How jobs are stored, leased, claimed and
 * woken up is the jobs module's business alone.
 */
export interface JobKind<Payload> {
  readonly type: JobType<Payload>;
  /** Attempts of this kind in flight at once in one process. */
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


/** A plain kind, whatever its payload, as domains hand it to the jobs module (`any`: each kind's own types are checked where it is written). */
export type AnyJobKind = JobKind<any>;
