import type { Tx } from '../db/transaction.ts';
import type { Job, JobKind, Outcome, Settlement } from './job-kind.ts';

/**
 * A laned kind as code names it: the type of its payload, and of what an
 * attempt needs (which an enqueuer that has it may hand over). Not a
 * `JobType`: a laned kind's jobs are enqueued in a lane (`Queue.enqueueInLane`),
 * never as plain ones.
 */
export interface LanedJobType<Payload, Work> {
  readonly name: string;
  readonly laned: true;
  /** Never set: carries the payload type. */
  readonly payload?: Payload;
  /** Never set: carries the type of what an attempt needs. */
  readonly work?: Work;
}

export function lanedJobType<Payload, Work>(name: string): LanedJobType<Payload, Work> {
  return { name, laned: true };
}

/** A laned kind's job: always in a lane. */
export interface LanedJob<Payload> extends Job<Payload> {
  lane: string;
}

/** How many of a lane's jobs may run at once in this process, how many more it holds ready in memory, and not before when. */
export interface LaneAdmission {
  limit: number;
  hold: number;
  notBefore: number;
}

/** One attempt, settled: what the kind records in its own tables, in the transaction that settles the job. */
export interface Attempt<Payload, Result> {
  job: LanedJob<Payload>;
  result: Result;
  settlement: Settlement;
  /** When the attempt ended. */
  at: number;
}

/**
 * What became of a laned attempt. With `failDueInLane`, the attempt showed
 * that its lane's target is down: up to `limit` of the lane's other due jobs
 * fail too, without being attempted, each by the kind's retry policy as if
 * attempted with `result` (those this process holds waiting first, then due
 * ones from the database), before this attempt's own settlement.
 */
export type LanedOutcome<Result> = Outcome & { failDueInLane?: { result: Result; error: string; limit: number } };

/**
 * A kind whose jobs have lanes (an endpoint's deliveries): jobs of one lane
 * are claimed together, admitted lane by lane, and paused and cancelled with
 * their lane. Its attempts read what they need in one go, answer a result of
 * their own, and are recorded in the domain's tables in the transaction that
 * settles them. Registered with `registerLaned`, enqueued with
 * `enqueueInLane`: a plain kind's path knows nothing of it.
 */
export interface LanedJobKind<Payload, Work, Result> extends Pick<JobKind<Payload>, 'concurrency' | 'leaseMs' | 'retryDelay'> {
  readonly type: LanedJobType<Payload, Work>;
  /** Jobs in flight per lane, and not before when (a failing lane is slowed down). */
  admit(lane: string): LaneAdmission;
  /** Turns claimed jobs into what `perform` needs, reading it in one go; null for a job whose subject is gone (it is dropped). */
  load(jobs: Array<LanedJob<Payload>>): Promise<Array<Work | null>>;
  /**
   * One attempt, with what `load` read for it (or what the enqueuer handed
   * over). A throw is a failed attempt, with the error's message; `signal` as
   * for a plain kind.
   */
  perform(work: Work, job: LanedJob<Payload>, signal: AbortSignal): Promise<Result>;
  outcomeOf(result: Result): LanedOutcome<Result>;
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

/** A laned kind, whatever its types, as domains hand it to the jobs module (`any`: each kind's own types are checked where it is written). */
export type AnyLanedJobKind = LanedJobKind<any, any, any>;
