import type { Deps } from '../deps.ts';
import type { Tx } from '../db/transaction.ts';
import { eventRow, newEnvelope, type EventEnvelope, type NewEvent } from '../events/envelope.ts';
import { eventRows, insertEvent } from '../events/events.repository.ts';
import { deliveryRows, newDeliveryRow } from './deliveries.repository.ts';
import { deliveryJob } from './delivery.job.ts';
import { findSubscribedEndpointIds } from './endpoints.repository.ts';

/**
 * The outbox: stores the event, and a delivery (with its job) for every
 * endpoint of the account that is enabled and subscribed right now, inside
 * the caller's transaction, so the event and its deliveries exist if and only
 * if the change that caused them does. The first attempts start as soon as
 * the transaction commits.
 */
export async function emitEvent(deps: Deps, tx: Tx, event: NewEvent): Promise<EventEnvelope> {
  const now = deps.clock.now();
  const envelope = newEnvelope(event.type, event.data, now);
  const row = eventRow(event.accountId, envelope, now);
  const endpointIds = await findSubscribedEndpointIds(tx.db, event.accountId, event.type);
  if (endpointIds.length === 0) {
    await insertEvent(tx.db, row);
    return envelope;
  }
  const deliveries = endpointIds.map((endpointId) => newDeliveryRow(now, event.accountId, endpointId, envelope));
  await deps.jobs.enqueue(
    tx,
    deliveryJob,
    deliveries.map((delivery) => ({
      id: delivery.id,
      payload: {},
      lane: delivery.endpoint_id,
      work: { deliveryId: delivery.id, eventType: envelope.type, payload: row.payload },
    })),
    // The endpoints were read enabled in this transaction: their lanes are open.
    { alongside: [eventRows(row), deliveryRows(deliveries)], lanesOpen: true },
  );
  return envelope;
}
