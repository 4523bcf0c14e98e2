import type { Deps } from '../deps.ts';
import type { Tx } from '../db/transaction.ts';
import { eventRow, newEnvelope, type EventEnvelope, type NewEvent } from '../events/envelope.ts';
import { eventRows } from '../events/events.repository.ts';
import { newId } from '../shared/ids.ts';
import { deliveriesEach, newDeliveryRow } from './deliveries.repository.ts';
import { deliveryJob } from './delivery.job.ts';
import { subscribedEndpoints } from './endpoints.repository.ts';
import { MAX_ENDPOINTS_PER_ACCOUNT } from './endpoints.service.ts';

/**
 * The outbox: stores the event, and a delivery (with its job) for every
 * endpoint of the account that is enabled and subscribed right now, inside
 * the caller's transaction, so the event and its deliveries exist if and only
 * if the change that caused them does. The endpoints are chosen as the event
 * is written (on PostgreSQL by the statement that writes it); the first
 * attempts start as soon as the transaction commits.
 */
export async function emitEvent(deps: Deps, tx: Tx, event: NewEvent): Promise<EventEnvelope> {
  const now = deps.clock.now();
  const envelope = newEnvelope(event.type, event.data, now);
  const row = eventRow(event.accountId, envelope, now);
  const chosen = subscribedEndpoints(event.accountId, event.type, () => newId('dlv', now), MAX_ENDPOINTS_PER_ACCOUNT);
  await deps.jobs.enqueueEach(tx, deliveryJob, chosen, {}, {
    alongside: { fixed: [eventRows(row)], each: [deliveriesEach(newDeliveryRow(now, event.accountId, '', envelope))] },
    workOf: (deliveryId) => ({ deliveryId, eventType: envelope.type, payload: row.payload }),
  });
  return envelope;
}
