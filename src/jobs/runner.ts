import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { DEFAULT_LEASE_MS, type AnyJobKind, type Attempt, type Job, type LaneAdmission, type Outcome, type Settlement } from './job-kind.ts';
import { claimJobs } from './sql/claimJobs.ts';
import { completeJobs } from './sql/completeJobs.ts';
import { dueKinds } from './sql/dueKinds.ts';
import { dueLanes } from './sql/dueLanes.ts';
import { extendLeases } from './sql/extendLeases.ts';
import { toJob } from './sql/job-row.ts';
import { rescheduleJobs } from './sql/rescheduleJobs.ts';
import { returnJobs } from './sql/returnJobs.ts';

export interface RunnerOptions {
  /** The safety net: how often to look for due jobs that nobody announced (another process's retries, say). */
  pollIntervalMs: number;
  /** Settlements are written this long after the first of a batch, together, in one transaction. */
  settleBatchMs: number;
}

export const DEFAULT_RUNNER_OPTIONS: RunnerOptions = { pollIntervalMs: 1000, settleBatchMs: 5 };

export interface RunnerDeps {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
}

/** A job held by this runner, with what its kind loaded for it or what the enqueuer handed over (undefined: not loaded yet). */
interface HeldJob {
  job: Job<unknown>;
  work: unknown;
}

/** A job this runner holds the lease of, and the way to let its attempt go, while one runs. */
interface Lease {
  kind: Kind;
  job: Job<unknown>;
  attempt: AbortController | null;
}

interface Kind {
  kind: AnyJobKind;
  name: string;
  leaseMs: number;
  inFlight: number;
  /** Lanes with jobs waiting for one of the kind's slots. */
  waiting: Set<Lane>;
}

/** Jobs of one kind and lane that this runner holds: those waiting in memory, and how many are in flight. */
interface Lane {
  kind: Kind;
  /** Null: the kind's jobs without a lane. */
  name: string | null;
  queue: HeldJob[];
  inFlight: number;
  /** The database may hold more due jobs of this lane than the last claim took. */
  backlog: boolean;
  /** A claim for it is under way. */
  filling: boolean;
  timer: Timer | null;
}

interface Pending {
  kind: Kind;
  attempt: Attempt<unknown, unknown>;
  /** False when the attempt threw: the job is settled, but there is no result to record. */
  hasResult: boolean;
}

export interface FailedWithoutAttempt {
  /** Jobs failed. */
  touched: number;
  /** Of those, jobs whose retries were used up. */
  gaveUp: number;
}

/** The runner of one process: claims due jobs, runs them within each kind's and lane's limits, settles their outcomes. */
export interface Runner {
  readonly id: string;
  register(kind: AnyJobKind): void;
  isRegistered(kind: string): boolean;
  /** How long a lease on a job of this kind lasts. */
  leaseMs(kind: string): number;
  /** Whether a job of this kind and lane, due now, can start here at once (an enqueue then leases it to this runner). */
  accepts(kind: string, lane: string | null): boolean;
  /** Jobs an enqueue leased to this runner, once that enqueue has committed; `work` when the enqueuer had it. */
  handover(kind: string, held: Array<{ job: Job<unknown>; work?: unknown }>): void;
  /** Something may be due now. */
  wake(): void;
  /** Something falls due at `at`. */
  wakeAt(at: number): void;
  /**
   * Fails up to `limit` due jobs of a lane without attempting them, each by
   * its kind's retry policy, as if attempted with `result` (its other jobs,
   * when an attempt showed the lane's target is down).
   */
  failDueInLane(kind: string, lane: string, result: unknown, error: string, limit: number): Promise<FailedWithoutAttempt>;
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

const WAKE_GRANULARITY_MS = 10;
/** An attempt whose lease would run out sooner than the next heartbeat and this is let go: the lease must not run out while it still runs. */
const LEASE_MARGIN_MS = 1000;
/** How long before the end of stop()'s grace attempts still running are aborted, to answer in what is left of it. */
const ABORTED_ANSWER_MS = 1000;

const leaseLost = () => new Error('this process no longer holds the job: another process may take it over');
const leaseRunningOut = () => new Error('this process could not renew its lease on the job in time');
const stoppingNow = () => new Error('this process is stopping');

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error));

export function createRunner(deps: RunnerDeps, options: RunnerOptions = DEFAULT_RUNNER_OPTIONS): Runner {
  const { db, clock, logger } = deps;
  const id = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  const kinds = new Map<string, Kind>();
  const lanes = new Map<string, Lane>();
  const inFlight = new Set<Promise<void>>();
  /**
   * The jobs this runner holds, by id: queued, in flight, or attempted and
   * waiting for their settlement to be written. Their leases are renewed until
   * then, and a claim that finds one again (its lease looked out of date) must
   * not run it twice.
   */
  const holding = new Map<string, Lease>();
  const hold = (kind: Kind, job: Job<unknown>) => holding.set(job.id, { kind, job, attempt: null });
  const filling = new Set<Promise<void>>();
  const wakes = new Map<number, Timer>();
  let pending: Pending[] = [];
  let settling: Promise<void> | null = null;
  let started = false;
  let stopping = false;
  let polling: Promise<void> | null = null;
  let pollAgain = false;
  let pollSoon: NodeJS.Immediate | null = null;
  let pollTimer: Timer | null = null;
  let heartbeatTimer: Timer | null = null;
  let starts = 0;

  const laneKey = (kind: string, lane: string | null) => (lane === null ? kind : `${kind}\u0000${lane}`);

  function kindOf(name: string): Kind {
    const kind = kinds.get(name);
    if (kind === undefined) throw new Error(`no job kind named ${name} is registered`);
    return kind;
  }

  function laneOf(kind: Kind, name: string | null): Lane {
    const key = laneKey(kind.name, name);
    let lane = lanes.get(key);
    if (lane === undefined) {
      lane = { kind, name, queue: [], inFlight: 0, backlog: false, filling: false, timer: null };
      lanes.set(key, lane);
    }
    return lane;
  }

  function dropIfIdle(lane: Lane): void {
    if (lane.queue.length === 0 && lane.inFlight === 0 && !lane.filling && !lane.backlog && lane.timer === null) {
      lanes.delete(laneKey(lane.kind.name, lane.name));
      lane.kind.waiting.delete(lane);
    }
  }

  /** A lane's jobs may run `limit` at once and this runner holds `hold` more of them in memory; the kind may slow a lane down. */
  function admissionOf(lane: Pick<Lane, 'kind' | 'name'>): LaneAdmission {
    const { kind } = lane.kind;
    if (lane.name !== null && kind.admit) return kind.admit(lane.name);
    return { limit: kind.concurrency, notBefore: 0, hold: 0 };
  }

  function accepts(kindName: string, laneName: string | null): boolean {
    if (!started || stopping) return false;
    const kind = kinds.get(kindName);
    if (kind === undefined) return false;
    const admission = admissionOf({ kind, name: laneName });
    if (admission.notBefore > clock.now()) return false;
    const lane = lanes.get(laneKey(kindName, laneName));
    if (lane === undefined) return true;
    // Older due jobs of the lane wait in the database: they go first.
    if (lane.backlog) return false;
    if (lane.queue.length + lane.inFlight >= admission.limit + admission.hold) {
      lane.backlog = true;
      return false;
    }
    return true;
  }

  function handover(kindName: string, held: Array<{ job: Job<unknown>; work?: unknown }>): void {
    const kind = kindOf(kindName);
    const lanesHanded = new Set<Lane>();
    for (const { job, work } of held) {
      const lane = laneOf(kind, job.lane);
      hold(kind, job);
      lane.queue.push({ job, work });
      lanesHanded.add(lane);
    }
    for (const lane of lanesHanded) pump(lane);
  }

  /**
   * Starts what the lane holds and may start now; when it holds nothing and
   * the database may hold more, claims them (the one thing here that waits on
   * I/O), then goes on. Called whenever something changes: a handover, an
   * attempt ending, a poll, a timer.
   */
  function pump(lane: Lane): void {
    if (stopping) return;
    startAdmitted(lane);
    if (lane.queue.length > 0 || !lane.backlog || lane.filling) return dropIfIdle(lane);
    // More may be held than the admission asks (handovers of transactions that committed together, or a lane
    // slowed down since): they are leased to this runner already, and wait their turn here.
    const admission = admissionOf(lane);
    const room = admission.limit + admission.hold - lane.inFlight;
    if (room <= 0) return;
    lane.filling = true;
    // Tracked so that `stop` waits for it: a claim between two statements must not outlive the database.
    const filled = fill(lane, room)
      .catch((err: unknown) => {
        // Not claimed again at once (that would spin on a failing database): the next poll or wake-up tries.
        lane.backlog = false;
        logger.error({ err, kind: lane.kind.name, lane: lane.name }, 'claiming jobs failed; the next poll tries again');
      })
      .finally(() => {
        filling.delete(filled);
        lane.filling = false;
        pump(lane);
      });
    filling.add(filled);
  }

  /** Starts, at once, what the lane holds and its admission and the kind's slots allow; sets a timer for a lane slowed down. */
  function startAdmitted(lane: Lane): void {
    const kind = lane.kind;
    while (lane.queue.length > 0) {
      const admission = admissionOf(lane);
      if (lane.inFlight >= admission.limit) return;
      if (kind.inFlight >= kind.kind.concurrency) return void kind.waiting.add(lane);
      const wait = admission.notBefore - clock.now();
      if (wait > 0) {
        lane.timer ??= clock.setTimeout(() => {
          lane.timer = null;
          pump(lane);
        }, wait);
        return;
      }
      start(lane, lane.queue.shift()!);
    }
  }

  /** Claims up to `room` due jobs for the lane, and loads what they need. */
  async function fill(lane: Lane, room: number): Promise<void> {
    const kind = lane.kind;
    const now = clock.now();
    const claimed = await claimJobs(db, { kind: kind.name, lane: lane.name, runner: id, now, leaseUntil: now + kind.leaseMs, limit: room });
    lane.backlog = claimed.length === room;
    const rows = claimed.filter((row) => !holding.has(row.id));
    if (rows.length === 0 || stopping) return void (await returnJobs(db, id, stopping ? rows.map((row) => row.id) : []));
    const jobs = rows.map((row) => toJob<unknown>(row));
    const works = kind.kind.load ? await kind.kind.load(jobs) : jobs;
    const gone: string[] = [];
    jobs.forEach((job, i) => {
      const work = works[i];
      if (work === null || work === undefined) gone.push(job.id);
      else {
        hold(kind, job);
        lane.queue.push({ job, work });
      }
    });
    // Their subject no longer exists (a deleted machine, say): nothing to do, ever.
    if (gone.length > 0) await completeJobs(db, id, gone);
  }

  function start(lane: Lane, held: HeldJob): void {
    const kind = lane.kind;
    lane.inFlight += 1;
    kind.inFlight += 1;
    starts += 1;
    const ended = () => {
      lane.inFlight -= 1;
      kind.inFlight -= 1;
      inFlight.delete(attempt);
      if (!stopping) {
        pump(lane);
        if (kind.waiting.size > 0) {
          for (const waiting of [...kind.waiting]) {
            kind.waiting.delete(waiting);
            pump(waiting);
          }
        }
      }
      dropIfIdle(lane);
    };
    // One promise per attempt (it runs for every delivery): its end, whether it settled or failed unexpectedly.
    const attempt: Promise<void> = attemptJob(kind, held).then(ended, (err: unknown) => {
      // Not settled: no longer held, so its lease runs out and any process takes it up again.
      holding.delete(held.job.id);
      logger.error({ err, kind: kind.name, jobId: held.job.id }, 'a job attempt could not be settled; its lease will run out and it will be attempted again');
      ended();
    });
    inFlight.add(attempt);
  }

  async function attemptJob(kind: Kind, held: HeldJob): Promise<void> {
    const { job } = held;
    const now = clock.now();
    if (job.leaseUntil - now < kind.leaseMs / 2) {
      // Held in memory long enough for its lease to run short (the heartbeat may have failed): renew it, or leave it to whoever has it now.
      if ((await extendLeases(db, id, kind.name, now + kind.leaseMs, [job.id])).length === 0) return void holding.delete(job.id);
      job.leaseUntil = now + kind.leaseMs;
    }
    const controller = new AbortController();
    const lease = holding.get(job.id);
    if (lease !== undefined) lease.attempt = controller;
    // Handed over without what it needs: loaded now, as a claim would have.
    const work = held.work !== undefined ? held.work : kind.kind.load ? (await kind.kind.load([job]))[0] : job;
    if (work === null || work === undefined) {
      await completeJobs(db, id, [job.id]).finally(() => holding.delete(job.id));
      return;
    }
    let result: unknown;
    let outcome: Outcome;
    let hasResult = true;
    try {
      result = await kind.kind.perform(work, job, controller.signal);
      outcome = kind.kind.outcomeOf ? kind.kind.outcomeOf(result) : (result as Outcome);
    } catch (err) {
      hasResult = false;
      logger.warn({ err, kind: kind.name, jobId: job.id, attempts: job.attempts + 1 }, 'a job attempt failed');
      outcome = { status: 'failed', error: errorMessage(err) };
    }
    if (lease !== undefined) lease.attempt = null;
    const at = clock.now();
    const settlement = settle(kind, job, outcome, at);
    queueSettlement({ kind, attempt: { job, result, settlement, at }, hasResult });
  }

  /** The kind's retry policy, applied: the one place a failure becomes a retry or the end. */
  function settle(kind: Kind, job: Job<unknown>, outcome: Outcome, at: number): Settlement {
    switch (outcome.status) {
      case 'done':
        return outcome;
      case 'release':
      case 'later':
        if (outcome.at === undefined) return outcome;
        wakeAt(outcome.at);
        return outcome;
      case 'failed': {
        const delay = kind.kind.retryDelay(job.attempts + 1);
        if (delay === null) return { status: 'gave_up', error: outcome.error };
        wakeAt(at + delay);
        return { status: 'retry', error: outcome.error, at: at + delay };
      }
    }
  }

  function queueSettlement(item: Pending): void {
    pending.push(item);
    settling ??= settleSoon();
  }

  /**
   * Settlements are written a few milliseconds after the first of a batch,
   * together: the work is done already, only its record waits (and a crash
   * meanwhile means another attempt, never a lost job).
   */
  async function settleSoon(): Promise<void> {
    await new Promise<void>((resolve) => setTimeout(resolve, options.settleBatchMs));
    while (pending.length > 0) {
      const batch = pending;
      pending = [];
      await settleAndLetGo(batch);
    }
    settling = null;
  }

  /** Writes the batch's settlements, then lets its jobs go from this runner's hold, written or not (a job not written is attempted again). */
  async function settleAndLetGo(batch: Pending[]): Promise<void> {
    try {
      await writeTogetherOrEachAlone(batch);
    } finally {
      for (const { attempt } of batch) holding.delete(attempt.job.id);
    }
  }

  /** One transaction for the batch; if it fails, each on its own, so one that cannot be written does not sink the rest. */
  async function writeTogetherOrEachAlone(batch: Pending[]): Promise<void> {
    try {
      return await writeSettlements(batch);
    } catch (err) {
      if (batch.length === 1) return void logger.error({ err, jobId: batch[0]!.attempt.job.id }, 'could not settle a job; it will be attempted again');
      logger.warn({ err, count: batch.length }, 'could not settle a batch of jobs; settling them one by one');
    }
    for (const item of batch) {
      try {
        await writeSettlements([item]);
      } catch (err) {
        logger.error({ err, jobId: item.attempt.job.id }, 'could not settle a job; it will be attempted again');
      }
    }
  }

  async function writeSettlements(batch: Pending[]): Promise<void> {
    await inTransaction(db, async (tx) => {
      const finished: string[] = [];
      const rescheduled: Array<{ id: string; run_at: number; attempts: number; last_error: string | null }> = [];
      const released: string[] = [];
      for (const { attempt } of batch) {
        const { job, settlement } = attempt;
        if (settlement.status === 'done' || settlement.status === 'gave_up') finished.push(job.id);
        else if (settlement.status === 'retry') rescheduled.push({ id: job.id, run_at: settlement.at, attempts: job.attempts + 1, last_error: settlement.error });
        else if (settlement.status === 'later') rescheduled.push({ id: job.id, run_at: settlement.at, attempts: 0, last_error: null });
        else if (settlement.at !== undefined) rescheduled.push({ id: job.id, run_at: settlement.at, attempts: job.attempts, last_error: null });
        else released.push(job.id);
      }
      for (const [kind, attempts] of attemptsByKind(batch, ({ kind }) => kind.kind.lockBeforeSettling !== undefined)) await kind.kind.lockBeforeSettling!(tx, attempts);
      const held = new Set([...(await completeJobs(tx.db, id, finished)), ...(await rescheduleJobs(tx.db, id, rescheduled))]);
      await returnJobs(tx.db, id, released);
      const recorded = attemptsByKind(batch, ({ kind, attempt, hasResult }) => hasResult && held.has(attempt.job.id) && kind.kind.record !== undefined);
      for (const [kind, attempts] of recorded) await kind.kind.record!(tx, attempts);
    });
  }

  function attemptsByKind(batch: Pending[], include: (pending: Pending) => boolean): Map<Kind, Array<Attempt<unknown, unknown>>> {
    const byKind = new Map<Kind, Array<Attempt<unknown, unknown>>>();
    for (const pending of batch) {
      if (!include(pending)) continue;
      const attempts = byKind.get(pending.kind) ?? [];
      attempts.push(pending.attempt);
      byKind.set(pending.kind, attempts);
    }
    return byKind;
  }

  /** The lane's jobs held here, waiting their turn, first; then those due in the database that no one holds. */
  async function failDueInLane(kindName: string, laneName: string, result: unknown, error: string, limit: number): Promise<FailedWithoutAttempt> {
    const kind = kindOf(kindName);
    const now = clock.now();
    const held = lanes.get(laneKey(kindName, laneName))?.queue.splice(0, limit).map(({ job }) => job) ?? [];
    const rows = held.length < limit ? await claimJobs(db, { kind: kindName, lane: laneName, runner: id, now, leaseUntil: now + kind.leaseMs, limit: limit - held.length }) : [];
    const claimed = rows.filter((row) => !holding.has(row.id)).map((row) => toJob<unknown>(row));
    for (const job of claimed) hold(kind, job);
    const jobs = [...held, ...claimed];
    let gaveUp = 0;
    const batch = jobs.map((job): Pending => {
      const settlement = settle(kind, job, { status: 'failed', error }, now);
      if (settlement.status === 'gave_up') gaveUp += 1;
      return { kind, attempt: { job, result, settlement, at: now }, hasResult: true };
    });
    await settleAndLetGo(batch);
    return { touched: jobs.length, gaveUp };
  }

  /** Polls when `at` comes, to the nearest 10 ms. */
  function wakeAt(at: number): void {
    if (stopping) return;
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

  function wake(): void {
    if (!started || stopping || pollSoon !== null) return;
    pollSoon = setImmediate(() => {
      pollSoon = null;
      void poll();
    });
  }

  /** Finds the lanes and kinds with due jobs, and sets their lanes pumping. One poll at a time; a wake meanwhile polls again after. */
  function poll(): Promise<void> {
    if (polling !== null) {
      pollAgain = true;
      return polling;
    }
    polling = (async () => {
      try {
        const now = clock.now();
        for (const kind of kinds.values()) {
          if (kind.kind.admit === undefined) continue;
          for (const name of await dueLanes(db, kind.name, now)) {
            if (stopping) return;
            const lane = laneOf(kind, name);
            lane.backlog = true;
            pump(lane);
          }
        }
        for (const name of await dueKinds(db, now)) {
          const kind = kinds.get(name);
          if (kind === undefined || stopping) continue;
          const lane = laneOf(kind, null);
          lane.backlog = true;
          pump(lane);
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

  /**
   * Renews the leases of every job this runner holds (queued, in flight, or
   * waiting for its settlement), every quarter of a lease. An attempt whose
   * job another process holds now, or whose lease could not be renewed and
   * would run out before the next heartbeat, is aborted: never two processes
   * at once on one job.
   */
  async function heartbeat(): Promise<void> {
    const now = clock.now();
    const byKind = new Map<Kind, Lease[]>();
    for (const lease of holding.values()) {
      const leases = byKind.get(lease.kind) ?? [];
      leases.push(lease);
      byKind.set(lease.kind, leases);
    }
    for (const [kind, leases] of byKind) {
      const until = now + kind.leaseMs;
      try {
        const renewed = new Set(await extendLeases(db, id, kind.name, until));
        for (const lease of leases) {
          if (renewed.has(lease.job.id)) lease.job.leaseUntil = until;
          // Held before this renewal began, and not renewed: settled meanwhile, or taken over after a stall.
          else if (lease.job.leaseUntil < until) lease.attempt?.abort(leaseLost());
        }
      } catch (err) {
        logger.error({ err, kind: kind.name }, 'could not renew job leases; attempts whose lease would run out are aborted');
      }
    }
    const soonest = clock.now() + heartbeatInterval() + LEASE_MARGIN_MS;
    for (const lease of holding.values()) {
      if (lease.attempt !== null && lease.job.leaseUntil < soonest) lease.attempt.abort(leaseRunningOut());
    }
  }

  function heartbeatInterval(): number {
    return Math.min(...[...kinds.values()].map((kind) => kind.leaseMs)) / 4;
  }

  /** Waits until no attempt is in flight (nor a claim or a poll, with `claims`), or until `until` (performance.now(); Infinity: no timer at all). */
  async function attemptsEnded(until: number, claims: boolean): Promise<void> {
    const busy = () => inFlight.size > 0 || (claims && (filling.size > 0 || polling !== null));
    while (busy() && performance.now() < until) {
      let timer: NodeJS.Timeout | undefined;
      // setTimeout would take Infinity for 1 ms and spin this loop.
      const limit = Number.isFinite(until) ? [new Promise<void>((resolve) => (timer = setTimeout(resolve, until - performance.now())))] : [];
      await Promise.race([Promise.allSettled([...inFlight, ...(claims ? [...filling, ...(polling ? [polling] : [])] : [])]), ...limit]);
      clearTimeout(timer);
    }
  }

  async function settledNow(): Promise<void> {
    while (inFlight.size > 0 || filling.size > 0 || polling !== null || pollSoon !== null) {
      if (pollSoon !== null) {
        clearImmediate(pollSoon);
        pollSoon = null;
        await poll();
      }
      await Promise.allSettled([...inFlight, ...filling, ...(polling ? [polling] : [])]);
    }
    while (settling !== null) await settling;
  }

  return {
    id,
    register(kind) {
      if (kinds.has(kind.type.name)) throw new Error(`job kind ${kind.type.name} is registered twice`);
      kinds.set(kind.type.name, { kind, name: kind.type.name, leaseMs: kind.leaseMs ?? DEFAULT_LEASE_MS, inFlight: 0, waiting: new Set() });
    },
    isRegistered: (kind) => kinds.has(kind),
    leaseMs: (kind) => kindOf(kind).leaseMs,
    accepts,
    handover,
    wake,
    wakeAt,
    failDueInLane,
    start() {
      if (started) return;
      started = true;
      const tick = () => {
        void poll().finally(() => {
          if (!stopping) pollTimer = clock.setTimeout(tick, options.pollIntervalMs);
        });
      };
      tick();
      if (kinds.size > 0) {
        const beat = () => {
          heartbeatTimer = clock.setTimeout(() => void heartbeat().finally(() => !stopping && beat()), heartbeatInterval());
        };
        beat();
      }
    },
    async stop(graceMs = Infinity) {
      if (!started || stopping) return;
      stopping = true;
      pollTimer?.clear();
      heartbeatTimer?.clear();
      if (pollSoon !== null) clearImmediate(pollSoon);
      for (const timer of wakes.values()) timer.clear();
      wakes.clear();
      // Real time: the grace is how long the process may take to exit. Attempts still running near its end are
      // aborted, and what they answer within the rest of it is settled.
      const deadline = performance.now() + graceMs;
      await attemptsEnded(deadline - Math.min(ABORTED_ANSWER_MS, graceMs / 2), true);
      if (inFlight.size > 0) {
        for (const lease of holding.values()) lease.attempt?.abort(stoppingNow());
        await attemptsEnded(deadline, false);
      }
      while (settling !== null) await settling;
      const unstarted = [...lanes.values()].flatMap((lane) => lane.queue.map(({ job }) => job.id));
      for (const lane of lanes.values()) lane.timer?.clear();
      lanes.clear();
      await returnJobs(db, id, unstarted).catch((err: unknown) => logger.error({ err }, 'could not give back job leases; they will run out'));
    },
    async drain() {
      for (;;) {
        const before = starts;
        await poll();
        await settledNow();
        if (starts === before) return;
      }
    },
  };
}
