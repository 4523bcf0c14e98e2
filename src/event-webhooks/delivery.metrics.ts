import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { DB } from '../db/database.ts';
import { countPendingDeliveries } from './deliveries.repository.ts';
import type { DeliveryStatus } from './event-webhooks.tables.ts';
import type { AttemptResult } from './sender.ts';

export interface DeliveryMetrics {
  observeAttempt(result: AttemptResult): void;
  finished(status: Exclude<DeliveryStatus, 'pending'>): void;
  /** Attempts failed without a connection while their endpoint is failing; `failed` of them were the last. */
  notSent(attempts: number, failed: number): void;
}

export function createDeliveryMetrics(registry: Registry, db: Kysely<DB>): DeliveryMetrics {
  const attempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    help: 'Delivery attempts, by outcome (success: a 2xx in time; failure: anything else; not_sent: failed without a connection while the endpoint is failing)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const deliveries = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Deliveries that reached a final state, by status (delivered or failed after the last attempt)',
    labelNames: ['status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'webhook_delivery_attempt_duration_seconds',
    help: 'Time from sending an attempt to its answer (or timeout)',
    labelNames: ['outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  new Gauge({
    name: 'webhook_delivery_queue_depth',
    help: 'Deliveries pending (waiting for their next attempt or in flight)',
    registers: [registry],
    async collect() {
      this.set(await countPendingDeliveries(db));
    },
  });
  for (const outcome of ['success', 'failure', 'not_sent']) {
    attempts.inc({ outcome }, 0);
  }
  for (const status of ['delivered', 'failed']) deliveries.inc({ status }, 0);
  return {
    observeAttempt(result) {
      const outcome = result.ok ? 'success' : 'failure';
      attempts.inc({ outcome });
      latency.observe({ outcome }, result.durationMs / 1000);
    },
    finished(status) {
      deliveries.inc({ status });
    },
    notSent(count, failed) {
      if (count > 0) attempts.inc({ outcome: 'not_sent' }, count);
      if (failed > 0) deliveries.inc({ status: 'failed' }, failed);
    },
  };
}
