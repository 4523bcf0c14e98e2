import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { WebhookConfig } from '../config.ts';
import type { DB } from '../db/database.ts';
import type { Clock } from '../shared/clock.ts';
import type { DeliveryMetrics } from './delivery.metrics.ts';
import {
  claimDueDeliveries,
  endpointsWithDueDeliveries,
  extendLease,
  failDueWithoutSending,
  recordOutcomes,
  releaseLeases,
  type LeasedDelivery,
  type Outcome,
} from './deliveries.repository.ts';
import { findTarget, type EndpointTarget } from './endpoints.repository.ts';
import { retryDelay } from './retry.ts';
import type { AttemptResult, Sender } from './sender.ts';
import { deliveryHeaders } from './signing.ts';
import type { Signal } from '../shared/signals.ts';

export interface WorkerOptions {
  /** Attempts in flight to one endpoint at most: a slow receiver ties up only its own lane. */
  perEndpointConcurrency: number;
  /** Deliveries a lane holds in memory beyond those in flight; the rest wait in the database. */
  laneBacklog: number;
  /** The safety net: how often to look for due deliveries nobody announced. */
  pollIntervalMs: number;
  /** How long an endpoint's url/secret/state may be reused before it is read again. */
  targetTtlMs: number;
  /**
   * After this many consecutive failures an endpoint is probed: one attempt
   * at a time, at most one per `probeIntervalMs`, until one succeeds. Each
   * failed probe also fails the endpoint's other due deliveries without
   * sending them (up to `notSentPerProbe`), so every delivery keeps to its own
   * retry schedule while a dead receiver with a large backlog costs one
   * connection a second, not a storm of connections, memory and writes.
   */
  probeAfterFailures: number;
  probeIntervalMs: number;
  notSentPerProbe: number;
}

export const DEFAULT_WORKER_OPTIONS: WorkerOptions = { perEndpointConcurrency: 16, laneBacklog: 256, pollIntervalMs: 1000, targetTtlMs: 1000, probeAfterFailures: 5, probeIntervalMs: 1000, notSentPerProbe: 1000 };

export interface Reservation {
  lockedBy: string;
  lockedUntil: number;
  /** How many endpoint changes this worker had heard of when the lease was given. */
  changesHeard: number;
}

export interface DeliveryWorker {
  /** Reacts to `due`, `endpoint:<id>` and `elsewhere` signals; ignores the rest. */
  hear(signal: Signal): void;
  readonly id: string;
  /** Inside an emitting transaction: the lease for its new deliveries, if this worker is taking work; each must also pass `accepts`. */
  lease(): Reservation | null;
  /** Whether this endpoint's lane can take one more delivery at once (if not, it will look in the database later). */
  accepts(endpointId: string): boolean;
  /** After that transaction commits: the reserved deliveries, to send now, and the endpoint as that transaction read it. */
  handoff(target: EndpointTarget, deliveries: LeasedDelivery[], reservation: Reservation): void;
  start(): void;
  /** Stops taking work, lets attempts in flight finish (each bounded by the timeout), records them and gives back the rest. */
  stop(): Promise<void>;
}

interface Lane {
  endpointId: string;
  target: EndpointTarget | null;
  targetReadAt: number;
  queue: LeasedDelivery[];
  inFlight: number;
  /** The database may hold more due deliveries for this lane than the last claim took. */
  backlog: boolean;
  busy: boolean;
  /** Consecutive failed attempts; at the probe threshold the lane is probing. */
  failures: number;
  nextProbeAt: number;
  probeTimer: NodeJS.Timeout | null;
}

export interface WorkerDeps {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
  sender: Sender;
  metrics: DeliveryMetrics;
  config: WebhookConfig;
}

const RETRY_WAKE_GRANULARITY_MS = 10;
const OUTCOME_BATCH_MS = 5;

export function createDeliveryWorker(deps: WorkerDeps, options: WorkerOptions = DEFAULT_WORKER_OPTIONS): DeliveryWorker {
  const { db, clock, logger, sender, metrics, config } = deps;
  const id = `wkr_${hostname()}_${process.pid}_${randomBytes(4).toString('hex')}`;
  // Long enough to wait behind one attempt in the lane and then make one; renewed before any attempt that could outlive it.
  const leaseMs = 2 * config.timeoutMs + 1000;
  const laneCapacity = options.perEndpointConcurrency + options.laneBacklog;
  const probeThreshold = options.probeAfterFailures;
  const isProbing = (lane: Lane) => lane.failures >= probeThreshold;
  const lanes = new Map<string, Lane>();
  const inFlight = new Set<Promise<void>>();
  const pumping = new Set<Promise<void>>();
  const retryWakes = new Map<number, NodeJS.Timeout>();
  let outcomes: Outcome[] = [];
  let flushing: Promise<void> | null = null;
  let started = false;
  let stopping = false;
  let polling = false;
  let pollAgain = false;
  let pollTimer: NodeJS.Timeout | null = null;
  let pollSoon: NodeJS.Immediate | null = null;
  let changesHeard = 0;

  function laneOf(endpointId: string): Lane {
    let lane = lanes.get(endpointId);
    if (lane === undefined) {
      lane = { endpointId, target: null, targetReadAt: 0, queue: [], inFlight: 0, backlog: false, busy: false, failures: 0, nextProbeAt: 0, probeTimer: null };
      lanes.set(endpointId, lane);
    }
    return lane;
  }

  /** Idle lanes go, except probing ones: they must remember that their endpoint is failing. */
  function dropIfIdle(lane: Lane): void {
    if (lane.queue.length === 0 && lane.inFlight === 0 && !lane.busy && !lane.backlog && !isProbing(lane)) lanes.delete(lane.endpointId);
  }

  function forgetLane(lane: Lane): void {
    if (lane.probeTimer !== null) clearTimeout(lane.probeTimer);
    lanes.delete(lane.endpointId);
  }

  function lease(): Reservation | null {
    if (!started || stopping) return null;
    return { lockedBy: id, lockedUntil: clock.now() + leaseMs, changesHeard };
  }

  function accepts(endpointId: string): boolean {
    const lane = lanes.get(endpointId);
    if (lane !== undefined && (lane.queue.length + lane.inFlight >= laneCapacity || lane.backlog || isProbing(lane))) {
      lane.backlog = true;
      return false;
    }
    return true;
  }

  function handoff(target: EndpointTarget, deliveries: LeasedDelivery[], reservation: Reservation): void {
    const lane = laneOf(target.id);
    if (reservation.changesHeard === changesHeard) {
      lane.target = target;
      lane.targetReadAt = clock.now();
    } else {
      // An endpoint changed (a rotated secret, say) after the emitting transaction read it: read it again.
      lane.target = null;
    }
    lane.queue.push(...deliveries);
    void pump(lane);
  }

  /** Starts what the lane has room for; reads the endpoint again when its copy is stale or was invalidated. */
  function pump(lane: Lane): Promise<void> {
    if (lane.busy) return Promise.resolve();
    // Tracked so that `stop` waits for it: a pump between two statements must not outlive the database.
    const pumped = pumpLane(lane).finally(() => pumping.delete(pumped));
    pumping.add(pumped);
    return pumped;
  }

  async function pumpLane(lane: Lane): Promise<void> {
    lane.busy = true;
    try {
      while (!stopping) {
        const probing = isProbing(lane);
        const limit = probing ? 1 : options.perEndpointConcurrency;
        if (probing && lane.queue.length > 1) {
          // Keep one to probe with; the rest wait in the database for any worker.
          const held = lane.queue.splice(1).map((delivery) => delivery.id);
          lane.backlog = true;
          await releaseLeases(db, held, id);
          if (stopping) break;
        }
        if (lane.queue.length === 0) {
          if (!lane.backlog || lane.inFlight >= limit) break;
          await fill(lane);
          if (stopping || lane.queue.length === 0) break;
        }
        if (lane.inFlight >= limit) break;
        if (probing) {
          const wait = lane.nextProbeAt - clock.now();
          if (wait > 0) {
            lane.probeTimer ??= setTimeout(() => {
              lane.probeTimer = null;
              void pump(lane);
            }, wait);
            break;
          }
          lane.nextProbeAt = clock.now() + options.probeIntervalMs;
        }
        if (lane.target === null || clock.now() - lane.targetReadAt > options.targetTtlMs) {
          lane.target = (await findTarget(db, lane.endpointId)) ?? null;
          lane.targetReadAt = clock.now();
          if (stopping) break;
          if (lane.target === null) {
            // Deleted: its deliveries went with it.
            lane.queue = [];
            lane.backlog = false;
            lane.failures = 0;
            break;
          }
        }
        if (!lane.target.enabled) {
          // Paused: the deliveries wait in the database until the endpoint is resumed.
          const held = lane.queue.map((delivery) => delivery.id);
          lane.queue = [];
          lane.backlog = false;
          await releaseLeases(db, held, id);
          break;
        }
        const delivery = lane.queue.shift()!;
        lane.inFlight += 1;
        const attempt = attemptDelivery(lane, lane.target, delivery)
          .catch((err: unknown) => logger.error({ err, deliveryId: delivery.id }, 'delivery attempt failed unexpectedly; its lease will expire and it will be retried'))
          .finally(() => {
            lane.inFlight -= 1;
            inFlight.delete(attempt);
            if (!stopping) void pump(lane);
            dropIfIdle(lane);
          });
        inFlight.add(attempt);
      }
    } catch (err) {
      logger.error({ err, endpointId: lane.endpointId }, 'delivery lane failed; its leases will expire and be retried');
      lane.queue = [];
    } finally {
      lane.busy = false;
      dropIfIdle(lane);
    }
  }

  /** Claims more due deliveries for a lane that has room. */
  async function fill(lane: Lane): Promise<void> {
    const room = (isProbing(lane) ? 1 : laneCapacity) - lane.queue.length - lane.inFlight;
    if (room <= 0) return;
    const now = clock.now();
    const claimed = await claimDueDeliveries(db, lane.endpointId, id, now, now + leaseMs, room);
    lane.backlog = claimed.length === room;
    if (claimed.length > 0) {
      lane.queue.push(...claimed);
      lane.target = null; // read it fresh with the claim
    }
  }

  async function attemptDelivery(lane: Lane, target: EndpointTarget, delivery: LeasedDelivery): Promise<void> {
    let now = clock.now();
    if (delivery.leaseUntil - now < config.timeoutMs + 1000) {
      if (!(await extendLease(db, delivery.id, id, now + leaseMs))) return; // another worker has it now
      delivery.leaseUntil = now + leaseMs;
    }
    now = clock.now();
    const headers = deliveryHeaders(target.secret, delivery.payload, delivery.eventType, delivery.id, now);
    const result = await sender.send(target.url, headers, delivery.payload);
    const probe = isProbing(lane);
    lane.failures = result.ok ? 0 : lane.failures + 1;
    metrics.observeAttempt(result);
    queueOutcome(outcomeOf(delivery, result, clock.now()));
    if (probe && !result.ok) await failTheRestOfLane(lane, result);
  }

  /** A probe failed: the endpoint's other due deliveries fail this attempt too, without a connection. */
  async function failTheRestOfLane(lane: Lane, probe: AttemptResult): Promise<void> {
    const why = `not sent: the endpoint failed its last ${lane.failures} attempts (latest: ${probe.error ?? `status ${probe.status}`}); it is tried again once a second`;
    try {
      const { touched, failed } = await failDueWithoutSending(db, lane.endpointId, clock.now(), config, why, options.notSentPerProbe);
      metrics.notSent(touched, failed);
      if (touched > 0) wakeAt(clock.now() + config.retryDelaysMs[0]!);
    } catch (err) {
      logger.error({ err, endpointId: lane.endpointId }, 'could not record the unsent attempts of a failing endpoint; they wait for the next probe');
    }
  }

  function outcomeOf(delivery: LeasedDelivery, result: AttemptResult, at: number): Outcome {
    const base = { id: delivery.id, responseStatus: result.status, body: result.body, error: result.error, durationMs: result.durationMs, at };
    if (result.ok) return { ...base, status: 'delivered', nextAttemptAt: null };
    const delay = retryDelay(delivery.seriesAttempts + 1, config);
    if (delay === null) return { ...base, status: 'failed', nextAttemptAt: null };
    wakeAt(at + delay);
    return { ...base, status: 'pending', nextAttemptAt: at + delay };
  }

  function queueOutcome(outcome: Outcome): void {
    outcomes.push(outcome);
    if (outcome.status !== 'pending') metrics.finished(outcome.status);
    if (flushing === null) flushing = flushOutcomes();
  }

  /**
   * Group commit: outcomes are written a few milliseconds after the first of a
   * batch, in one transaction. The receiver already has the event; only the
   * record waits (and a crash meanwhile means another attempt, never a loss).
   */
  async function flushOutcomes(): Promise<void> {
    await new Promise<void>((resolve) => setTimeout(resolve, OUTCOME_BATCH_MS));
    while (outcomes.length > 0) {
      const batch = outcomes;
      outcomes = [];
      await recordOutcomesOrEach(batch);
    }
    flushing = null;
  }

  /**
   * One statement for the batch; if it fails, each outcome on its own, so that
   * one that cannot be written does not take its neighbours down with it.
   * An unrecorded outcome is not a lost delivery: its lease expires and the
   * attempt is made again.
   */
  async function recordOutcomesOrEach(batch: Outcome[]): Promise<void> {
    try {
      await recordOutcomes(db, id, batch);
      return;
    } catch (err) {
      if (batch.length === 1) return void logger.error({ err, deliveryId: batch[0]!.id }, 'could not record a delivery outcome');
      logger.warn({ err, count: batch.length }, 'could not record a batch of delivery outcomes; recording them one by one');
    }
    for (const outcome of batch) {
      try {
        await recordOutcomes(db, id, [outcome]);
      } catch (err) {
        logger.error({ err, deliveryId: outcome.id }, 'could not record a delivery outcome');
      }
    }
  }

  /** Polls when a retry this worker scheduled falls due, to the nearest 10 ms. */
  function wakeAt(at: number): void {
    if (stopping) return;
    const bucket = Math.ceil(at / RETRY_WAKE_GRANULARITY_MS) * RETRY_WAKE_GRANULARITY_MS;
    if (retryWakes.has(bucket)) return;
    const timer = setTimeout(() => {
      retryWakes.delete(bucket);
      requestPoll();
    }, Math.max(0, bucket - clock.now()));
    timer.unref();
    retryWakes.set(bucket, timer);
  }

  function requestPoll(): void {
    if (stopping || pollSoon !== null) return;
    pollSoon = setImmediate(() => {
      pollSoon = null;
      void poll();
    });
  }

  async function poll(): Promise<void> {
    if (stopping) return;
    if (polling) {
      pollAgain = true;
      return;
    }
    polling = true;
    try {
      for (const endpointId of await endpointsWithDueDeliveries(db, clock.now())) {
        if (stopping) break;
        const lane = laneOf(endpointId);
        lane.backlog = true;
        void pump(lane);
      }
    } catch (err) {
      logger.error({ err }, 'polling for due deliveries failed');
    } finally {
      polling = false;
    }
    if (pollAgain) {
      pollAgain = false;
      requestPoll();
    }
  }

  function hear(signal: Signal): void {
    if (signal.startsWith('endpoint:')) {
      changesHeard += 1;
      const lane = lanes.get(signal.slice('endpoint:'.length));
      if (lane !== undefined) {
        // Changed (a new URL, say): read it again, and give it a fair chance at full speed.
        lane.target = null;
        lane.failures = 0;
        lane.nextProbeAt = 0;
      }
    } else if (signal === 'elsewhere') {
      // Another process on this SQLite file committed something: any endpoint may have changed, new work may wait.
      changesHeard += 1;
      for (const lane of lanes.values()) lane.target = null;
    } else if (signal !== 'due') {
      return;
    }
    requestPoll();
  }

  function start(): void {
    if (started) return;
    started = true;
    const tick = () => {
      void poll().finally(() => {
        if (!stopping) {
          pollTimer = setTimeout(tick, options.pollIntervalMs);
          pollTimer.unref();
        }
      });
    };
    tick();
  }

  async function stop(): Promise<void> {
    if (!started || stopping) return;
    stopping = true;
    if (pollTimer !== null) clearTimeout(pollTimer);
    if (pollSoon !== null) clearImmediate(pollSoon);
    for (const timer of retryWakes.values()) clearTimeout(timer);
    retryWakes.clear();
    while (inFlight.size > 0 || pumping.size > 0) await Promise.allSettled([...inFlight, ...pumping]);
    while (flushing !== null) await flushing;
    const unstarted = [...lanes.values()].flatMap((lane) => lane.queue.map((delivery) => delivery.id));
    for (const lane of [...lanes.values()]) forgetLane(lane);
    await releaseLeases(db, unstarted, id).catch((err: unknown) => logger.error({ err }, 'could not give back leases; they will expire'));
  }

  return { id, lease, accepts, handoff, hear, start, stop };
}
