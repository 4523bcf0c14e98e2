import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import type { Clock } from '../shared/clock.ts';
import { DEFAULT_LEASE_MS, type AnyJobKind, type Job, type Outcome } from './job-kind.ts';
import type { AnyLanedJobKind, LanedJob, LanedOutcome } from './laned-kind.ts';
import { createLanes, type HeldJob, type Kind, type Lane, type Lanes } from './lanes.ts';
import { createLeases, type Leases } from './leases.ts';
import { createPolling, type Polling } from './polling.ts';
import { createSettlements, dueAgainAt, settlementOf, type Ended, type Settlements } from './settlement.ts';
import { claimJobs } from './sql/claimJobs.ts';
import { completeJobs } from './sql/completeJobs.ts';
import { extendLeases } from './sql/extendLeases.ts';
import { toJob } from './sql/job-row.ts';
import { returnJobs } from './sql/returnJobs.ts';

export interface RunnerOptions {
  /** The safety net: how often to look for due jobs that nobody announced (another process's retries, say). */
  pollIntervalMs: number;
  /** Settlements are written this long after the first of a batch, together, in one transaction. */
  settleBatchMs: number;
}

export const DEFAULT_RUNNER_OPTIONS: RunnerOptions = { pollIntervalMs: 1000, settleBatchMs: 5 };

export interface RunnerDeps {
  /** Where settlements are written (inTransaction); `db` runs the claims and leases. */
  database: Database;
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
}

/** The runner of one process: claims due jobs, runs them within each kind's and lane's limits, settles their outcomes. */
export interface Runner {
  readonly id: string;
  register(kind: AnyJobKind): void;
  registerLaned(kind: AnyLanedJobKind): void;
  isRegistered(kind: string): boolean;
  /** How long a lease on a job of this kind lasts. */
  leaseMs(kind: string): number;
  /** Whether a job of this kind and lane, due now, can start here at once (an enqueue then leases it to this runner). */
  accepts(kind: string, lane: string | null): boolean;
  /** Jobs an enqueue leased to this runner, once that enqueue has committed; `work` when the enqueuer of a laned kind's jobs had it. */
  handover(kind: string, held: Array<{ job: Job<unknown>; work?: unknown }>): void;
  /** Something may be due now. */
  wake(): void;
  /** Something falls due at `at`. */
  wakeAt(at: number): void;
  start(): void;
  /**
   * Takes nothing more, lets attempts in flight finish (for at most `graceMs`)
   * and settles them, and gives back the jobs it held unstarted. An attempt
   * still running after the grace is aborted (its signal) and given a moment
   * to answer; one that ignores that keeps its lease, and once that runs out
   * another process takes the job up.
   */
  stop(graceMs?: number): Promise<void>;
  /** Runs what is due now, and what that makes due now, until nothing is (tests). */
  drain(): Promise<void>;
}

/** How long before the end of stop()'s grace attempts still running are aborted, to answer in what is left of it. */
const ABORTED_ANSWER_MS = 1000;

const stoppingNow = () => new Error('this process is stopping');

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Wires the runner's parts: lanes (what starts when), leases (what this
 * process holds, renewed by a heartbeat), polling (when to look for due
 * jobs) and settlements (outcomes written in batches). What is here is one
 * attempt from claim to settlement, and starting and stopping.
 */
export function createRunner(deps: RunnerDeps, options: RunnerOptions = DEFAULT_RUNNER_OPTIONS): Runner {
  const { database, db, clock, logger } = deps;
  const id = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  const kinds = new Map<string, Kind>();
  const inFlight = new Set<Promise<void>>();
  let started = false;
  let stopping = false;
  let heartbeatTimer: ReturnType<Clock['setTimeout']> | null = null;
  let starts = 0;

  const leases = createLeases({ db, clock, logger, runnerId: id });
  const settlements = createSettlements({ database, logger, runnerId: id, letGo: leases.letGo }, options.settleBatchMs);
  const lanes = createLanes({ clock, logger, stopping: () => stopping, claim: (lane, room) => claimInto(parts, lane, room), start });
  const polling = createPolling({ db, clock, logger, kinds, due: lanes.markDue }, options.pollIntervalMs);
  const parts: Parts = { db, clock, logger, runnerId: id, leases, settlements, polling, lanes, stopping: () => stopping };
  const claimsAndPoll = () => [...lanes.claims, ...(polling.current ? [polling.current] : [])];

  function add(kind: Kind): void {
    if (kinds.has(kind.name)) throw new Error(`job kind ${kind.name} is registered twice`);
    kinds.set(kind.name, kind);
  }

  function kindOf(name: string): Kind {
    const kind = kinds.get(name);
    if (kind === undefined) throw new Error(`no job kind named ${name} is registered`);
    return kind;
  }

  function start(lane: Lane, held: HeldJob): void {
    starts += 1;
    const finished = () => {
      inFlight.delete(attempt);
      lanes.attemptEnded(lane);
    };
    // One promise per attempt (it runs for every delivery): its end, whether it settled or failed unexpectedly.
    const attempt: Promise<void> = attemptJob(parts, lane.kind, held).then(finished, (err: unknown) => {
      // Not settled: no longer held, so its lease runs out and any process takes it up again.
      leases.letGo(held.job.id);
      logger.error({ err, kind: lane.kind.name, jobId: held.job.id }, 'a job attempt could not be settled; its lease will run out and it will be attempted again');
      finished();
    });
    inFlight.add(attempt);
  }

  function heartbeatInterval(): number {
    return Math.min(...[...kinds.values()].map((kind) => kind.leaseMs)) / 4;
  }

  async function stop(graceMs = Infinity): Promise<void> {
    if (!started || stopping) return;
    stopping = true;
    polling.stop();
    heartbeatTimer?.clear();
    // Real time: the grace is how long the process may take to exit. Attempts still running near its end are
    // aborted, and what they answer within the rest of it is settled.
    const deadline = performance.now() + graceMs;
    await attemptsEnded(inFlight, claimsAndPoll, deadline - Math.min(ABORTED_ANSWER_MS, graceMs / 2));
    if (inFlight.size > 0) {
      leases.abortAttempts(stoppingNow());
      await attemptsEnded(inFlight, () => [], deadline);
    }
    await settlements.written();
    const unstarted = lanes.clear().map((job) => job.id);
    await returnJobs(db, id, unstarted).catch((err: unknown) => logger.error({ err }, 'could not give back job leases; they will run out'));
  }

  return {
    id,
    register(kind) {
      add({ laned: false, kind, name: kind.type.name, leaseMs: kind.leaseMs ?? DEFAULT_LEASE_MS, inFlight: 0, waiting: new Set() });
    },
    registerLaned(kind) {
      add({ laned: true, kind, name: kind.type.name, leaseMs: kind.leaseMs ?? DEFAULT_LEASE_MS, inFlight: 0, waiting: new Set() });
    },
    isRegistered: (kind) => kinds.has(kind),
    leaseMs: (kind) => kindOf(kind).leaseMs,
    accepts(kindName, laneName) {
      const kind = kinds.get(kindName);
      return started && !stopping && kind !== undefined && lanes.accepts(kind, laneName);
    },
    handover(kindName, held) {
      const kind = kindOf(kindName);
      for (const { job } of held) leases.hold(kind.name, kind.leaseMs, job);
      lanes.enqueue(kind, held.map(({ job, work }) => ({ job, work })));
    },
    wake: polling.wake,
    wakeAt: polling.wakeAt,
    start() {
      if (started) return;
      started = true;
      polling.start();
      if (kinds.size > 0) {
        const beat = () => {
          heartbeatTimer = clock.setTimeout(() => void leases.renew(heartbeatInterval()).finally(() => !stopping && beat()), heartbeatInterval());
        };
        beat();
      }
    },
    stop,
    async drain() {
      for (;;) {
        const before = starts;
        await polling.poll();
        while (inFlight.size > 0 || claimsAndPoll().length > 0 || (await polling.pollWoken())) {
          await Promise.allSettled([...inFlight, ...claimsAndPoll()]);
        }
        await settlements.written();
        if (starts === before) return;
      }
    },
  };
}

/** What one attempt, from claim to settlement, needs of its runner. */
interface Parts {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
  runnerId: string;
  leases: Leases;
  settlements: Settlements;
  polling: Polling;
  lanes: Lanes;
  stopping(): boolean;
}

/** Claims up to `room` due jobs for the lane, and, for a laned kind, loads what they need. */
async function claimInto(parts: Parts, lane: Lane, room: number): Promise<void> {
  const { db, clock, runnerId: id, leases } = parts;
  const kind = lane.kind;
  const now = clock.now();
  const claimed = await claimJobs(db, { kind: kind.name, lane: lane.name, runner: id, now, leaseUntil: now + kind.leaseMs, limit: room });
  lane.backlog = claimed.length === room;
  const rows = claimed.filter((row) => !leases.has(row.id));
  if (rows.length === 0 || parts.stopping()) return void (await returnJobs(db, id, parts.stopping() ? rows.map((row) => row.id) : []));
  const jobs = rows.map((row) => toJob<unknown>(row));
  if (!kind.laned) {
    for (const job of jobs) {
      leases.hold(kind.name, kind.leaseMs, job);
      lane.queue.push({ job });
    }
    return;
  }
  const works = await kind.kind.load(jobs as Array<LanedJob<unknown>>);
  const gone: string[] = [];
  jobs.forEach((job, i) => {
    const work = works[i];
    if (work === null || work === undefined) gone.push(job.id);
    else {
      leases.hold(kind.name, kind.leaseMs, job);
      lane.queue.push({ job, work });
    }
  });
  // Their subject no longer exists (a deleted endpoint's delivery, say): nothing to do, ever.
  if (gone.length > 0) await completeJobs(db, id, gone);
}

async function attemptJob(parts: Parts, kind: Kind, held: HeldJob): Promise<void> {
  const { db, clock, runnerId: id, leases } = parts;
  const { job } = held;
  const now = clock.now();
  if (job.leaseUntil - now < kind.leaseMs / 2) {
    // Held in memory long enough for its lease to run short (the heartbeat may have failed): renew it, or leave it to whoever has it now.
    if ((await extendLeases(db, id, kind.name, now + kind.leaseMs, [job.id])).length === 0) return void leases.letGo(job.id);
    job.leaseUntil = now + kind.leaseMs;
  }
  const controller = new AbortController();
  const lease = leases.get(job.id);
  if (lease !== undefined) lease.attempt = controller;
  const ended = kind.laned ? await attemptLaned(parts, kind, held, controller.signal) : await attemptPlain(parts, kind, job, controller.signal);
  if (lease !== undefined) lease.attempt = null;
  if (ended !== null) parts.settlements.queue(ended);
}

type PlainKind = Extract<Kind, { laned: false }>;
type LanedKind = Extract<Kind, { laned: true }>;

async function attemptPlain(parts: Parts, kind: PlainKind, job: Job<unknown>, signal: AbortSignal): Promise<Ended> {
  let outcome: Outcome;
  try {
    outcome = await kind.kind.perform(job, signal);
  } catch (err) {
    outcome = failedAttempt(parts, kind, job, err);
  }
  return endedAttempt(parts, kind, job, outcome);
}

/** A laned kind's attempt, with what it needs; null when its subject is gone (the job is dropped). */
async function attemptLaned(parts: Parts, kind: LanedKind, held: HeldJob, signal: AbortSignal): Promise<Ended | null> {
  const { db, runnerId: id, leases } = parts;
  const job = held.job as LanedJob<unknown>;
  // Handed over without what it needs: loaded now, as a claim would have.
  const work = held.work !== undefined ? held.work : (await kind.kind.load([job]))[0];
  if (work === null || work === undefined) {
    await completeJobs(db, id, [job.id]).finally(() => leases.letGo(job.id));
    return null;
  }
  let result: unknown;
  let outcome: LanedOutcome<unknown>;
  let hasResult = true;
  try {
    result = await kind.kind.perform(work, job, signal);
    outcome = kind.kind.outcomeOf(result);
  } catch (err) {
    hasResult = false;
    outcome = failedAttempt(parts, kind, job, err);
  }
  if (outcome.failDueInLane !== undefined) await failDueInLane(parts, kind, job.lane, outcome.failDueInLane);
  return endedAttempt(parts, kind, job, outcome, { kind: kind.kind, result, hasResult });
}

function failedAttempt(parts: Parts, kind: Kind, job: Job<unknown>, err: unknown): Outcome {
  parts.logger.warn({ err, kind: kind.name, jobId: job.id, attempts: job.attempts + 1 }, 'a job attempt failed');
  return { status: 'failed', error: errorMessage(err) };
}

/** The attempt's settlement, by its kind's retry policy; the runner wakes when the job falls due again. */
function endedAttempt(parts: Parts, kind: Kind, job: Job<unknown>, outcome: Outcome, laned?: Ended['laned']): Ended {
  const at = parts.clock.now();
  const settlement = settlementOf(kind.kind, job, outcome, at);
  const dueAt = dueAgainAt(settlement);
  if (dueAt !== undefined) parts.polling.wakeAt(dueAt);
  return laned === undefined ? { job, settlement, at } : { job, settlement, at, laned };
}

/**
 * Fails up to `limit` due jobs of the lane without attempting them, as if
 * attempted with `result`: those held here, waiting their turn, first; then
 * those due in the database that no one holds. Settled at once, before the
 * attempt that asked for it.
 */
async function failDueInLane(parts: Parts, kind: LanedKind, laneName: string, failing: { result: unknown; error: string; limit: number }): Promise<void> {
  const { db, clock, logger, runnerId: id, leases } = parts;
  const { result, error, limit } = failing;
  try {
    const now = clock.now();
    const held = parts.lanes.take(kind, laneName, limit);
    const rows = held.length < limit ? await claimJobs(db, { kind: kind.name, lane: laneName, runner: id, now, leaseUntil: now + kind.leaseMs, limit: limit - held.length }) : [];
    const claimed = rows.filter((row) => !leases.has(row.id)).map((row) => toJob<unknown>(row));
    for (const job of claimed) leases.hold(kind.name, kind.leaseMs, job);
    await parts.settlements.write([...held, ...claimed].map((job) => endedAttempt(parts, kind, job, { status: 'failed', error }, { kind: kind.kind, result, hasResult: true })));
  } catch (err) {
    logger.error({ err, kind: kind.name, lane: laneName }, "could not fail a lane's due jobs without attempting them; they wait for their turn");
  }
}

/** Waits until no attempt is in flight (nor any of `others`), or until `until` (performance.now(); Infinity: no timer at all). */
async function attemptsEnded(inFlight: ReadonlySet<Promise<void>>, others: () => Array<Promise<void>>, until: number): Promise<void> {
  while ((inFlight.size > 0 || others().length > 0) && performance.now() < until) {
    let timer: NodeJS.Timeout | undefined;
    // setTimeout would take Infinity for 1 ms and spin this loop.
    const limit = Number.isFinite(until) ? [new Promise<void>((resolve) => (timer = setTimeout(resolve, until - performance.now())))] : [];
    await Promise.race([Promise.allSettled([...inFlight, ...others()]), ...limit]);
    clearTimeout(timer);
  }
}

