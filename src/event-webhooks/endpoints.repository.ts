import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { dialectOf } from '../db/connect.ts';
import { toIso } from '../shared/clock.ts';
import type { EventEndpointsTable } from './event-webhooks.tables.ts';

export interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

/** What the delivery worker needs to send to an endpoint. */
export interface EndpointTarget {
  id: string;
  url: string;
  secret: string;
  enabled: boolean;
}

export function toEndpoint(row: EventEndpointsTable): Endpoint {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    description: row.description,
    enabled: row.enabled === 1,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  };
}

export async function insertEndpoint(db: Kysely<DB>, row: EventEndpointsTable): Promise<void> {
  await db.insertInto('event_endpoints').values(row).execute();
}

export async function countEndpoints(db: Kysely<DB>, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('event_endpoints')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function findEndpointRow(db: Kysely<DB>, accountId: string, id: string): Promise<EventEndpointsTable | undefined> {
  return db.selectFrom('event_endpoints').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function listEndpointRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined): Promise<EventEndpointsTable[]> {
  let query = db.selectFrom('event_endpoints').selectAll().where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

export async function updateEndpointRow(
  db: Kysely<DB>,
  accountId: string,
  id: string,
  changes: Partial<Pick<EventEndpointsTable, 'url' | 'events' | 'description' | 'enabled' | 'secret'>> & { updated_at: number },
): Promise<EventEndpointsTable | undefined> {
  return db
    .updateTable('event_endpoints')
    .set(changes)
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirst();
}

/** Deletes the endpoint; its deliveries go with it, so whatever was pending is cancelled. */
export async function deleteEndpointRow(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('event_endpoints').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Spec 6.4 rule 4: the one statement of who receives what. */
export function subscribes(events: readonly string[], type: string): boolean {
  return events.includes('*') || events.includes(type);
}

/**
 * The account's enabled endpoints that want this event type, as of this
 * transaction. On PostgreSQL they are locked as the deliveries' foreign key
 * would lock them, when they are chosen: a delete of one of them waits for
 * this transaction (and then cancels its delivery) instead of failing it.
 * SQLite writers already run one at a time.
 */
export async function findSubscribedEndpointIds(db: Kysely<DB>, accountId: string, type: string): Promise<string[]> {
  // Once per event: a template rather than the query builder, which would cost more to build it than SQLite takes to run it.
  const lock = dialectOf(db) === 'postgres' ? sql` for key share` : sql``;
  const { rows } = await sql<Pick<EventEndpointsTable, 'id' | 'events'>>`select id, events from event_endpoints where account_id = ${accountId} and enabled = 1${lock}`.execute(db);
  return rows.filter((row) => subscribes(JSON.parse(row.events) as string[], type)).map((row) => row.id);
}

export async function findTarget(db: Kysely<DB>, id: string): Promise<EndpointTarget | undefined> {
  const row = await db.selectFrom('event_endpoints').select(['id', 'url', 'secret', 'enabled']).where('id', '=', id).executeTakeFirst();
  return row && { id: row.id, url: row.url, secret: row.secret, enabled: row.enabled === 1 };
}
