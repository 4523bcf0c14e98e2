import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { DeliveryStatus } from './event-webhooks.tables.ts';
import type { AttemptResult } from './sender.ts';

export interface DeliveryMetrics {
  observeAttempt(result: AttemptResult): void;
  finished(status: Exclude<DeliveryStatus, 'pending'>): void;
  /** Attempts failed without a connection while their endpoint is failing. */
  notSent(attempts: number): void;
}

/** `pending`: how many deliveries wait for an attempt or are in flight (their jobs). */
export function createDeliveryMetrics(registry: Registry, pending: () => Promise<number>): DeliveryMetrics {
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
      this.set(await pending());
    },
  });
  // Bound once: every attempt counts, and looking a series up by its labels costs more than counting.
  const attemptsBy = { success: attempts.labels('success'), failure: attempts.labels('failure'), not_sent: attempts.labels('not_sent') };
  const latencyBy = { success: latency.labels('success'), failure: latency.labels('failure') };
  const deliveriesBy = { delivered: deliveries.labels('delivered'), failed: deliveries.labels('failed') };
  for (const series of [...Object.values(attemptsBy), ...Object.values(deliveriesBy)]) series.inc(0);
  return {
    observeAttempt(result) {
      const outcome = result.ok ? 'success' : 'failure';
      attemptsBy[outcome].inc();
      latencyBy[outcome].observe(result.durationMs / 1000);
    },
    finished(status) {
      deliveriesBy[status].inc();
    },
    notSent(count) {
      if (count > 0) attemptsBy.not_sent.inc(count);
    },
  };
}
