import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { TEST_EVENT_TYPE } from '../events/event-types.ts';
import { newDeliveryRow, type EventEnvelope } from '../events/events.service.ts';
import { conflict, notFound } from '../http/errors.ts';
import { toIso } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import { insertEvent } from '../events/events.repository.ts';
import {
  findDeliveryRow,
  insertDeliveryRow,
  listDeliveryRows,
  recordOutcomes,
  restartDelivery,
  toDelivery,
  type Delivery,
} from './deliveries.repository.ts';
import { findEndpointRow } from './endpoints.repository.ts';
import type { DeliveriesTable } from './event-webhooks.tables.ts';
import { deliveryHeaders } from './signing.ts';
import { announce } from '../shared/signals.ts';

export interface TestResult {
  ok: boolean;
  status: number | null;
  error: string | null;
}

/**
 * Sends `webhook.test` to one endpoint now, once, even when it is paused, and
 * reports the outcome; the attempt is recorded like any delivery (no retries).
 * @throws AppError 404 unknown endpoint.
 */
export async function sendTestEvent(deps: Deps, accountId: string, endpointId: string): Promise<TestResult> {
  const endpoint = await findEndpointRow(deps.db, accountId, endpointId);
  if (endpoint === undefined) throw notFound('The event webhook endpoint');
  const now = deps.clock.now();
  const envelope: EventEnvelope = { id: newId('evt', now), type: TEST_EVENT_TYPE, createdAt: toIso(now), data: { endpointId } };
  const payload = JSON.stringify(envelope);
  const holder = `test_${newId('dlv', now)}`;
  // Written as failed until its answer is recorded: no worker ever takes it up (a test is sent once), and if this
  // process dies mid-attempt the record says so instead of staying pending.
  const delivery: DeliveriesTable = {
    ...newDeliveryRow(now, accountId, endpointId, envelope, { lockedBy: holder, lockedUntil: null }),
    status: 'failed',
    next_attempt_at: null,
    last_error: 'The test was interrupted before its answer was recorded.',
    last_attempt_at: now,
  };
  await inTransaction(deps.db, async (tx) => {
    await insertEvent(tx.db, { id: envelope.id, account_id: accountId, type: envelope.type, payload, created_at: now });
    await insertDeliveryRow(tx.db, delivery);
  });
  const result = await deps.webhooks.sender.send(endpoint.url, deliveryHeaders(endpoint.secret, payload, envelope.type, delivery.id, deps.clock.now()), payload);
  deps.webhooks.metrics.observeAttempt(result);
  const status = result.ok ? 'delivered' : 'failed';
  deps.webhooks.metrics.finished(status);
  try {
    await recordOutcomes(deps.db, holder, [
      { id: delivery.id, status, responseStatus: result.status, body: result.body, error: result.error, durationMs: result.durationMs, at: deps.clock.now(), nextAttemptAt: null },
    ]);
  } catch (err) {
    // The receiver has had its test; the caller gets the answer even if the record keeps saying "interrupted".
    deps.logger.error({ err, deliveryId: delivery.id }, 'could not record the outcome of a test delivery');
  }
  return { ok: result.ok, status: result.status, error: result.error };
}

/** @throws AppError 404 when the endpoint filter names an unknown endpoint. */
export async function listDeliveries(
  db: Kysely<DB>,
  accountId: string,
  endpointId: string | undefined,
  limit: number,
  cursor: string | undefined,
): Promise<Delivery[]> {
  if (endpointId !== undefined && (await findEndpointRow(db, accountId, endpointId)) === undefined) {
    throw notFound('The event webhook endpoint');
  }
  return (await listDeliveryRows(db, accountId, endpointId, limit, cursor)).map(toDelivery);
}

/**
 * Sends a finished delivery again: a new attempt series with the same dlv_ and evt_, starting now.
 * @throws AppError 404 unknown delivery, 409 when it is still pending.
 */
export async function retryDelivery(deps: Deps, accountId: string, id: string): Promise<Delivery> {
  const row = await inTransaction(deps.db, async (tx) => {
    const restarted = await restartDelivery(tx.db, accountId, id, deps.clock.now());
    if (restarted !== undefined) await announce(deps.signals, tx, 'due');
    return restarted;
  });
  if (row !== undefined) return toDelivery(row);
  if ((await findDeliveryRow(deps.db, accountId, id)) === undefined) throw notFound('The delivery');
  throw conflict('delivery_pending', 'This delivery is still pending: its next attempt is already scheduled.');
}
