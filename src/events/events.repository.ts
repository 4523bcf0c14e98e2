import { CompiledQuery, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { prepared, preferPrepared } from '../db/prepared.ts';
import type { EventsTable } from './events.tables.ts';

const insertEventQuery = prepared(5, (db, id: string, accountId: string, type: string, payload: string, createdAt: number) =>
  db.insertInto('events').values({ id, account_id: accountId, type, payload, created_at: createdAt }),
);

export async function insertEvent(db: Kysely<DB>, row: EventsTable): Promise<void> {
  await insertEventQuery.execute(db, row.id, row.account_id, row.type, row.payload, row.created_at);
}

/** An endpoint an event was just queued for, and the id of its delivery. */
export interface QueuedDelivery {
  endpoint_id: string;
  url: string;
  secret: string;
  delivery_id: string;
}

/**
 * PostgreSQL's whole emit in one statement: the event, the account's enabled
 * endpoints that want its type (locked as findEnabledEndpoints locks them, and
 * chosen by subscribedTargets' rule, in SQL), and one pending delivery for
 * each, leased to `lockedBy` when it is not null.
 * `deliveryIds` must hold an id for every endpoint an account may have.
 * PostgreSQL runs data-modifying CTEs whether or not the query reads them; the
 * deliveries' foreign keys are checked at the end of the statement, when the
 * event's row is there.
 */
const insertEventWithDeliveriesText = `with event as (
    insert into events (id, account_id, type, payload, created_at) values ($1, $2, $3, $4, $5)
  ),
  enabled as (
    select id, url, secret, events from event_endpoints where account_id = $2 and enabled = 1 for key share
  ),
  subscribed as (
    select id, url, secret, row_number() over (order by id) as n
    from enabled where events::jsonb ? $3 or events::jsonb ? '*'
  ),
  queued as (
    insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, series_attempts, next_attempt_at, locked_by, locked_until, created_at)
    select ($6::text[])[n], $2, id, $1, $3, 'pending', 0, 0, $5, $7::text, $8::bigint, $5 from subscribed
  )
  select id as endpoint_id, url, secret, ($6::text[])[n] as delivery_id from subscribed order by n`;
preferPrepared(insertEventWithDeliveriesText);

export async function insertEventWithDeliveries(
  db: Kysely<DB>,
  row: EventsTable,
  deliveryIds: string[],
  lease: { lockedBy: string; lockedUntil: number } | null,
): Promise<QueuedDelivery[]> {
  const parameters = [row.id, row.account_id, row.type, row.payload, row.created_at, deliveryIds, lease?.lockedBy ?? null, lease?.lockedUntil ?? null];
  return (await db.executeQuery<QueuedDelivery>(CompiledQuery.raw(insertEventWithDeliveriesText, parameters))).rows;
}
