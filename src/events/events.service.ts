import type { Tx } from '../db/transaction.ts';
import { insertDeliveries, type LeasedDelivery } from '../event-webhooks/deliveries.repository.ts';
import { insertEventReadingEndpoints } from './events.repository.ts';
import { subscribedTargets, type EndpointTarget } from '../event-webhooks/endpoints.repository.ts';
import type { DeliveriesTable } from '../event-webhooks/event-webhooks.tables.ts';
import type { Reservation } from '../event-webhooks/delivery.worker.ts';
import { announce } from '../shared/signals.ts';
import { toIso } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import type { EventType } from './event-types.ts';

export interface NewEvent {
  accountId: string;
  type: EventType;
  data: Record<string, unknown>;
}

export interface EventEnvelope {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

/**
 * The outbox: stores the event, and one delivery for every endpoint of the
 * account that is enabled and subscribed right now, inside the caller's
 * transaction, so the event exists if and only if the change that caused it
 * does. Deliveries this process's worker can start at once are leased to it
 * and handed over on commit (no polling delay); the rest are announced to
 * every worker.
 */
export async function emitEvent(deps: Deps, tx: Tx, event: NewEvent): Promise<EventEnvelope> {
  const now = deps.clock.now();
  const envelope: EventEnvelope = { id: newId('evt', now), type: event.type, createdAt: toIso(now), data: event.data };
  const payload = JSON.stringify(envelope);
  const endpoints = await insertEventReadingEndpoints(tx.db, { id: envelope.id, account_id: event.accountId, type: event.type, payload, created_at: now });
  const targets = subscribedTargets(endpoints, event.type);
  if (targets.length === 0) return envelope;
  const worker = deps.webhooks.worker;
  const handoffs: Array<{ target: EndpointTarget; delivery: LeasedDelivery; lease: Reservation }> = [];
  const rows = targets.map((target): DeliveriesTable => {
    const lease = worker?.reserve(target.id) ?? null;
    const row = newDeliveryRow(now, event.accountId, target.id, envelope, lease);
    if (lease !== null) {
      handoffs.push({ target, lease, delivery: { id: row.id, eventId: envelope.id, eventType: envelope.type, payload, attempts: 0, seriesAttempts: 0, leaseUntil: lease.lockedUntil } });
    }
    return row;
  });
  await insertDeliveries(tx.db, rows);
  if (handoffs.length < rows.length) await announce(deps.signals, tx, 'due');
  if (worker !== null && handoffs.length > 0) tx.afterCommit(() => handoffs.forEach(({ target, delivery, lease }) => worker.handoff(target, [delivery], lease)));
  return envelope;
}

export function newDeliveryRow(
  now: number,
  accountId: string,
  endpointId: string,
  envelope: EventEnvelope,
  lease: { lockedBy: string; lockedUntil: number | null } | null,
): DeliveriesTable {
  return {
    id: newId('dlv', now),
    account_id: accountId,
    endpoint_id: endpointId,
    event_id: envelope.id,
    event_type: envelope.type,
    status: 'pending',
    attempts: 0,
    series_attempts: 0,
    next_attempt_at: now,
    locked_by: lease?.lockedBy ?? null,
    locked_until: lease?.lockedUntil ?? null,
    last_status: null,
    last_body: null,
    last_error: null,
    last_duration_ms: null,
    last_attempt_at: null,
    created_at: now,
  };
}
