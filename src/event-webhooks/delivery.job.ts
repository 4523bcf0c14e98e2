import type { FastifyBaseLogger } from 'fastify';
import type { Tx } from '../db/transaction.ts';
import type { Kysely } from 'kysely';
import type { WebhookConfig } from '../config.ts';
import type { DB } from '../db/database.ts';
import { lanedJobType, type Attempt, type LanedJobKind, type LaneAdmission, type LanedOutcome } from '../jobs/laned-kind.ts';
import type { Clock } from '../shared/clock.ts';
import type { Signal } from '../db/signals.ts';
import { findDeliveriesToSend, recordAttempts, type AttemptRecord, type DeliveryToSend } from './deliveries.repository.ts';
import type { DeliveryMetrics } from './delivery.metrics.ts';
import { findTarget, lockEndpoints, resetFailingClock, startFailingClock, type EndpointTarget } from './endpoints.repository.ts';
import { retryDelay } from './retry.ts';
import type { AttemptResult, Sender } from './sender.ts';
import { deliveryHeaders } from './signing.ts';

/**
 * A delivery's attempt series is one job, in its endpoint's lane, with the
 * delivery's own id (it has one job at a time): a manual retry is a new job.
 */
export const deliveryJob = lanedJobType<Record<string, never>, DeliveryToSend>('webhook.delivery');

export interface DeliveryOptions {
  /** Attempts in flight to one endpoint at most: a slow receiver ties up only its own lane. */
  perEndpointConcurrency: number;
  /** Deliveries a lane holds ready in memory beyond those in flight; the rest wait in the database. */
  laneBacklog: number;
  /** How long an endpoint's url, secret and state are reused before they are read again. */
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

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  perEndpointConcurrency: 16,
  laneBacklog: 256,
  targetTtlMs: 1000,
  probeAfterFailures: 5,
  probeIntervalMs: 1000,
  notSentPerProbe: 1000,
};

/** How an endpoint's lane is doing: open, or probing after consecutive failures (one attempt at a time, spaced out). */
type LaneMode = { mode: 'open'; failures: number } | { mode: 'probing'; failures: number; lastProbeAt: number };

/**
 * What an attempt came to: recorded as an attempt (the receiver's answer, or
 * why it failed, even before anything was sent), or released without one,
 * because the endpoint is paused or gone, or could not be read (then again at `retryAt`).
 * A failed probe says how many attempts its endpoint has failed in a row
 * (`probeFailed`); an attempt failed without a connection because a probe
 * failed is `notSent`.
 */
export type DeliveryResult = { recorded: true; attempt: AttemptResult; probeFailed?: number; notSent?: true } | { recorded: false; retryAt?: number };

export interface DeliveryKindDeps {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
  sender: Sender;
  metrics: DeliveryMetrics;
  config: WebhookConfig;
  /** Changes whenever another process has committed to a shared SQLite file: a copy of an endpoint read before may be stale (see otherProcessesCommits). */
  otherProcessesCommits: () => number;
}

export interface DeliveryKind extends LanedJobKind<Record<string, never>, DeliveryToSend, DeliveryResult> {
  /** An endpoint changed (`endpoint:<id>`, heard from any process): its copy is stale, and its lane gets a fair chance again. */
  hear(signal: Signal): void;
}

/**
 * Delivering an event to an endpoint: claim → sign and send → record. Each
 * attempt is signed afresh with the endpoint's current secret; its outcome is
 * recorded on the delivery in the transaction that settles its job, and the
 * retry schedule is the one of retry.ts, however the attempt failed.
 */
export function createDeliveryKind(deps: DeliveryKindDeps, options: DeliveryOptions = DEFAULT_DELIVERY_OPTIONS): DeliveryKind {
  const { db, clock, logger, sender, metrics, config } = deps;
  const lanes = new Map<string, LaneMode>();
  const targets = new Map<string, { target: EndpointTarget | null; readAt: number; version: number }>();
  const open: LaneAdmission = { limit: options.perEndpointConcurrency, hold: options.laneBacklog, notBefore: 0 };

  /** The endpoint as of at most targetTtlMs ago, and not older than this process's last notice of a change (a signal, or another process's commit). */
  async function targetOf(endpointId: string): Promise<EndpointTarget | null> {
    const version = deps.otherProcessesCommits();
    const cached = targets.get(endpointId);
    if (cached !== undefined && cached.version === version && clock.now() - cached.readAt <= options.targetTtlMs) return cached.target;
    const target = (await findTarget(db, endpointId)) ?? null;
    targets.set(endpointId, { target, readAt: clock.now(), version });
    return target;
  }

  /** Counts the attempt against its lane: five failures in a row and the lane is probed; one success opens it again. */
  function observe(endpointId: string, ok: boolean): LaneMode {
    if (ok) {
      lanes.delete(endpointId);
      return { mode: 'open', failures: 0 };
    }
    const failures = (lanes.get(endpointId)?.failures ?? 0) + 1;
    const lane: LaneMode = failures >= options.probeAfterFailures ? { mode: 'probing', failures, lastProbeAt: clock.now() } : { mode: 'open', failures };
    lanes.set(endpointId, lane);
    return lane;
  }

  /** A probe failed: the endpoint's other due deliveries fail this attempt too, without a connection (the runner does it, before the probe's own settlement). */
  function failTheRestOfLane(failures: number, probe: AttemptResult): LanedOutcome<DeliveryResult>['failDueInLane'] {
    const why = `not sent: the endpoint failed its last ${failures} attempts (latest: ${probe.error ?? `status ${probe.status}`}); it is tried again once a second`;
    const notSent: DeliveryResult = { recorded: true, attempt: { ok: false, status: null, body: null, error: why, durationMs: 0 }, notSent: true };
    return { result: notSent, error: why, limit: options.notSentPerProbe };
  }

  function recordOf({ job, result, settlement, at }: Attempt<Record<string, never>, DeliveryResult>): AttemptRecord {
    const attempt = result.recorded ? result.attempt : { ok: false, status: null, body: null, error: null, durationMs: 0 };
    const base = { id: job.id, endpointId: job.lane, ok: attempt.ok, responseStatus: attempt.status, body: attempt.body, error: attempt.error, durationMs: attempt.durationMs, at };
    if (settlement.status === 'retry') return { ...base, status: 'pending', nextAttemptAt: settlement.at };
    return { ...base, status: settlement.status === 'done' ? 'delivered' : 'failed', nextAttemptAt: null };
  }

  /**
   * Keeps each endpoint's failing clock (auto-disable) in the settling
   * transaction. Statements only when the clock changes, as this process
   * knows it: a healthy endpoint's batches cost none. In id order, as
   * another process's batch takes them.
   */
  async function trackFailing(tx: Tx, records: readonly AttemptRecord[]): Promise<void> {
    const byEndpoint = new Map<string, { lastOk: number; failures: number[] }>();
    for (const record of records) {
      let seen = byEndpoint.get(record.endpointId);
      if (seen === undefined) byEndpoint.set(record.endpointId, (seen = { lastOk: -Infinity, failures: [] }));
      if (record.ok) seen.lastOk = Math.max(seen.lastOk, record.at);
      else seen.failures.push(record.at);
    }
    for (const [endpointId, { lastOk, failures }] of [...byEndpoint].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const cached = targets.get(endpointId)?.target ?? undefined;
      const known = cached === undefined ? undefined : cached.failingSince;
      const firstFailure = failures.filter((at) => at > lastOk).reduce((min, at) => Math.min(min, at), Infinity);
      const after = firstFailure === Infinity ? null : firstFailure;
      if (lastOk !== -Infinity) {
        if (known === null && after === null) continue;
        await resetFailingClock(tx.db, endpointId, after);
        if (cached) tx.afterCommit(() => void (cached.failingSince = after));
      } else if (known == null && after !== null) {
        await startFailingClock(tx.db, endpointId, after);
        if (cached) tx.afterCommit(() => void (cached.failingSince = after));
      }
    }
  }

  return {
    type: deliveryJob,
    concurrency: Infinity,
    retryDelay: (failures) => retryDelay(failures, config),
    load: (jobs) => findDeliveriesToSend(db, jobs.map((job) => job.id)),

    admit(endpointId) {
      const lane = lanes.get(endpointId);
      if (lane?.mode !== 'probing') return open;
      return { limit: 1, hold: 0, notBefore: lane.lastProbeAt + options.probeIntervalMs };
    },

    async perform(delivery, job, signal) {
      const endpointId = job.lane;
      let target: EndpointTarget | null;
      try {
        target = await targetOf(endpointId);
      } catch (err) {
        logger.error({ err, endpointId }, 'could not read an endpoint; its delivery waits a second, no attempt counted');
        return { recorded: false, retryAt: clock.now() + 1000 };
      }
      // Deleted (its jobs went with it) or paused (its lane is paused too): not attempted, nothing recorded.
      if (target === null || !target.enabled) return { recorded: false };
      const headers = deliveryHeaders(target.secret, delivery.payload, delivery.eventType, delivery.deliveryId, clock.now());
      const probing = lanes.get(endpointId)?.mode === 'probing';
      const attempt = await sender.send(target.url, headers, delivery.payload, signal);
      metrics.observeAttempt(attempt);
      const lane = observe(endpointId, attempt.ok);
      return probing && lane.mode === 'probing' ? { recorded: true, attempt, probeFailed: lane.failures } : { recorded: true, attempt };
    },

    outcomeOf(result): LanedOutcome<DeliveryResult> {
      if (!result.recorded) return result.retryAt === undefined ? { status: 'release' } : { status: 'release', at: result.retryAt };
      if (result.attempt.ok) return { status: 'done' };
      const failed = { status: 'failed' as const, error: result.attempt.error ?? 'failed' };
      return result.probeFailed === undefined ? failed : { ...failed, failDueInLane: failTheRestOfLane(result.probeFailed, result.attempt) };
    },

    // Endpoints first: see lockEndpoints.
    lockBeforeSettling: (tx, attempts) => lockEndpoints(tx.db, [...new Set(attempts.map(({ job }) => job.lane))]),

    async record(tx, attempts) {
      const recorded = attempts.filter((attempt) => attempt.result.recorded);
      const records = recorded.map(recordOf);
      await recordAttempts(tx.db, records);
      await trackFailing(tx, records);
      tx.afterCommit(() => {
        let notSent = 0;
        for (const { settlement, result } of recorded) {
          if (result.recorded && result.notSent) notSent += 1;
          if (settlement.status === 'done') metrics.finished('delivered');
          else if (settlement.status === 'gave_up') metrics.finished('failed');
        }
        metrics.notSent(notSent);
      });
    },

    hear(signal) {
      if (!signal.startsWith('endpoint:')) return;
      const endpointId = signal.slice('endpoint:'.length);
      // Changed (a new URL, a rotated secret): read it again, and give it a fair chance at full speed.
      targets.delete(endpointId);
      lanes.delete(endpointId);
    },
  };
}
