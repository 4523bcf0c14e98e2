import type { Deps } from '../deps.ts';
import type { Tx } from '../db/transaction.ts';
import { eventRow, newEnvelope, type EventEnvelope, type NewEvent } from '../events/envelope.ts';
import { eventRows } from '../events/events.repository.ts';
import { deliveryRows, newDeliveryRow } from './deliveries.repository.ts';
import { deliveryJob } from './delivery.job.ts';
import { subscribedEndpointIds } from './endpoints.repository.ts';

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
  const endpointIds = await subscribedEndpointIds(tx.db, event.accountId, event.type);
  const deliveries = endpointIds.map((endpointId) => newDeliveryRow(now, event.accountId, endpointId, envelope));
  const jobs = deliveries.map((delivery) => ({
    id: delivery.id,
    lane: delivery.endpoint_id,
    payload: {},
    work: { deliveryId: delivery.id, eventType: envelope.type, payload: row.payload },
  }));
  // The endpoints were read enabled, so their lanes are open; one paused meanwhile is seen by the attempt, which reads its endpoint again.
  await deps.jobs.enqueueInLane(tx, deliveryJob, jobs, { alongside: [eventRows(row), deliveryRows(deliveries)], lanesOpen: true });
  return envelope;
}
