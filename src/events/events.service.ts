import type { Tx } from '../db/transaction.ts';
import { insertDeliveries, releaseLeases, type LeasedDelivery } from '../event-webhooks/deliveries.repository.ts';
import { insertEvent, insertEventWithDeliveries } from './events.repository.ts';
import type { EventsTable } from './events.tables.ts';
import { dialectOf } from '../db/connect.ts';
import { MAX_ENDPOINTS_PER_ACCOUNT } from '../event-webhooks/endpoints.service.ts';
import { findEnabledEndpoints, subscribedTargets, type EndpointTarget } from '../event-webhooks/endpoints.repository.ts';
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
  const row: EventsTable = { id: envelope.id, account_id: event.accountId, type: event.type, payload: JSON.stringify(envelope), created_at: now };
  await (dialectOf(tx.db) === 'postgres' ? emitInOneStatement(deps, tx, row) : emitInStatements(deps, tx, row, envelope));
  return envelope;
}

interface Handoff {
  target: EndpointTarget;
  delivery: LeasedDelivery;
}

/**
 * PostgreSQL, where an emit costs mostly round trips: the event and its
 * deliveries in one statement, all leased to this process's worker; those
 * whose lane cannot start them at once are given back before the commit.
 */
async function emitInOneStatement(deps: Deps, tx: Tx, row: EventsTable): Promise<void> {
  const worker = deps.webhooks.worker;
  const lease = worker?.lease() ?? null;
  const deliveryIds = Array.from({ length: MAX_ENDPOINTS_PER_ACCOUNT }, () => newId('dlv', row.created_at));
  const queued = await insertEventWithDeliveries(tx.db, row, deliveryIds, lease);
  const handoffs: Handoff[] = [];
  if (worker !== null && lease !== null) {
    const refused: string[] = [];
    for (const { endpoint_id, url, secret, delivery_id } of queued) {
      if (worker.accepts(endpoint_id)) handoffs.push({ target: { id: endpoint_id, url, secret, enabled: true }, delivery: leasedDelivery(delivery_id, row, lease) });
      else refused.push(delivery_id);
    }
    if (refused.length > 0) await releaseLeases(tx.db, refused, lease.lockedBy);
  }
  await finishEmit(deps, tx, queued.length, handoffs, lease);
}

/** SQLite, where statements are cheap: the event, the endpoints, then their deliveries, each leased if its lane can start it at once. */
async function emitInStatements(deps: Deps, tx: Tx, row: EventsTable, envelope: EventEnvelope): Promise<void> {
  await insertEvent(tx.db, row);
  const targets = subscribedTargets(await findEnabledEndpoints(tx.db, row.account_id), row.type);
  if (targets.length === 0) return;
  const worker = deps.webhooks.worker;
  const lease = worker?.lease() ?? null;
  const handoffs: Handoff[] = [];
  const deliveries = targets.map((target): DeliveriesTable => {
    const leased = lease !== null && worker!.accepts(target.id);
    const delivery = newDeliveryRow(row.created_at, row.account_id, target.id, envelope, leased ? lease : null);
    if (leased) handoffs.push({ target, delivery: leasedDelivery(delivery.id, row, lease) });
    return delivery;
  });
  await insertDeliveries(tx.db, deliveries);
  await finishEmit(deps, tx, deliveries.length, handoffs, lease);
}

function leasedDelivery(id: string, event: EventsTable, lease: Reservation): LeasedDelivery {
  return { id, eventId: event.id, eventType: event.type, payload: event.payload, attempts: 0, seriesAttempts: 0, leaseUntil: lease.lockedUntil };
}

/** Deliveries left unleased are announced to every worker; the leased ones go to this one's lanes once the transaction commits. */
async function finishEmit(deps: Deps, tx: Tx, created: number, handoffs: Handoff[], lease: Reservation | null): Promise<void> {
  if (handoffs.length < created) await announce(deps.signals, tx, 'due');
  const worker = deps.webhooks.worker;
  if (worker !== null && lease !== null && handoffs.length > 0) {
    tx.afterCommit(() => handoffs.forEach(({ target, delivery }) => worker.handoff(target, [delivery], lease)));
  }
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
