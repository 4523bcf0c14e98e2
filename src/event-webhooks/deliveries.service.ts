import type { Kysely } from 'kysely';
import type { Deps } from '../deps.ts';
import type { DB } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { TEST_EVENT_TYPE } from '../events/event-types.ts';
import { eventRow, newEnvelope } from '../events/envelope.ts';
import { insertEvent } from '../events/events.repository.ts';
import { conflict, notFound } from '../http/errors.ts';
import {
  findAttemptLog,
  findDeliveryRow,
  type AttemptLogEntry,
  type DeliveryFilters,
  insertDeliveries,
  listDeliveryRows,
  newDeliveryRow,
  recordAttempts,
  restartDelivery,
  toDelivery,
  type Delivery,
} from './deliveries.repository.ts';
import type { DeliveryMetrics } from './delivery.metrics.ts';
import { deliveryJob } from './delivery.job.ts';
import { findEndpointRow } from './endpoints.repository.ts';
import type { Sender } from './sender.ts';
import { deliveryHeaders } from './signing.ts';

export interface TestResult {
  ok: boolean;
  status: number | null;
  error: string | null;
}

/** What sending a test needs besides the base services: the same sender and metrics as every delivery. */
export interface TestSending {
  sender: Sender;
  metrics: DeliveryMetrics;
}

/**
 * Sends `webhook.test` to one endpoint now, once, even when it is paused, and
 * reports the outcome; the attempt is recorded like any delivery, but has no
 * job: nothing ever retries it.
 * @throws AppError 404 unknown endpoint.
 */
export async function sendTestEvent(deps: Deps, { sender, metrics }: TestSending, accountId: string, endpointId: string): Promise<TestResult> {
  const endpoint = await findEndpointRow(deps.db, accountId, endpointId);
  if (endpoint === undefined) throw notFound('The event webhook endpoint');
  const now = deps.clock.now();
  const envelope = newEnvelope(TEST_EVENT_TYPE, { endpointId }, now);
  const event = eventRow(accountId, envelope, now);
  // Written as failed until its answer is recorded: if this process dies mid-attempt the record says so instead of staying pending.
  const delivery = {
    ...newDeliveryRow(now, accountId, endpointId, envelope),
    status: 'failed' as const,
    next_attempt_at: null,
    last_error: 'The test was interrupted before its answer was recorded.',
    last_attempt_at: now,
  };
  await inTransaction(deps.database, async (tx) => {
    await insertEvent(tx.db, event);
    await insertDeliveries(tx.db, [delivery]);
  });
  const result = await sender.send(endpoint.url, deliveryHeaders(endpoint.secret, event.payload, envelope.type, delivery.id, deps.clock.now()), event.payload);
  metrics.observeAttempt(result);
  const status = result.ok ? 'delivered' : 'failed';
  metrics.finished(status);
  try {
    await recordAttempts(deps.db, [
      { id: delivery.id, endpointId, ok: result.ok, status, nextAttemptAt: null, responseStatus: result.status, body: result.body, error: result.error, durationMs: result.durationMs, at: deps.clock.now() },
    ]);
  } catch (err) {
    // The receiver has had its test; the caller gets the answer even if the record keeps saying "interrupted".
    deps.logger.error({ err, deliveryId: delivery.id }, 'could not record the outcome of a test delivery');
  }
  return { ok: result.ok, status: result.status, error: result.error };
}

/** @throws AppError 404 when the endpoint filter names an unknown endpoint. */
export async function listDeliveries(db: Kysely<DB>, accountId: string, filters: DeliveryFilters, limit: number, cursor: string | undefined): Promise<Delivery[]> {
  if (filters.endpointId !== undefined && (await findEndpointRow(db, accountId, filters.endpointId)) === undefined) {
    throw notFound('The event webhook endpoint');
  }
  return (await listDeliveryRows(db, accountId, filters, limit, cursor)).map(toDelivery);
}

/**
 * One delivery with its attempt log.
 * @throws AppError 404 unknown delivery (or another account's).
 */
export async function getDelivery(db: Kysely<DB>, accountId: string, id: string): Promise<Delivery & { attemptLog: AttemptLogEntry[] }> {
  const row = await findDeliveryRow(db, accountId, id);
  if (row === undefined) throw notFound('The delivery');
  return { ...toDelivery(row), attemptLog: await findAttemptLog(db, id) };
}

/**
 * Sends a finished delivery again: a new attempt series (a new job) with the same dlv_ and evt_, starting now.
 * @throws AppError 404 unknown delivery, 409 when it is still pending.
 */
export async function retryDelivery(deps: Deps, accountId: string, id: string): Promise<Delivery> {
  const row = await inTransaction(deps.database, async (tx) => {
    const restarted = await restartDelivery(tx.db, accountId, id, deps.clock.now());
    if (restarted !== undefined) await deps.jobs.enqueueInLane(tx, deliveryJob, [{ id: restarted.id, payload: {}, lane: restarted.endpoint_id }]);
    return restarted;
  });
  if (row !== undefined) return toDelivery(row);
  if ((await findDeliveryRow(deps.db, accountId, id)) === undefined) throw notFound('The delivery');
  throw conflict('delivery_pending', 'This delivery is still pending: its next attempt is already scheduled.');
}
