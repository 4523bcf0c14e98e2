import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { dialectOf } from '../db/connect.ts';
import { prepared } from '../db/prepared.ts';
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

const enabledEndpointsQuery = prepared(1, (db, accountId: string) => {
  const query = db.selectFrom('event_endpoints').select(['id', 'url', 'secret', 'events']).where('account_id', '=', accountId).where('enabled', '=', 1);
  // The lock the foreign key of the deliveries takes anyway, taken when they are chosen: a delete of one of these
  // endpoints waits for this transaction (and then cancels its deliveries) instead of failing it. SQLite writers
  // already run one at a time.
  return dialectOf(db) === 'postgres' ? query.forKeyShare() : query;
});

/** An enabled endpoint as an emitting transaction reads it. */
export type EnabledEndpointRow = Pick<EventEndpointsTable, 'id' | 'url' | 'secret' | 'events'>;

/** The account's enabled endpoints, as of this transaction; on PostgreSQL they cannot be deleted until it ends. */
export function findEnabledEndpoints(db: Kysely<DB>, accountId: string): Promise<EnabledEndpointRow[]> {
  return enabledEndpointsQuery.execute(db, accountId);
}

/** Those of the endpoints that want this event type. */
export function subscribedTargets(rows: readonly EnabledEndpointRow[], type: string): EndpointTarget[] {
  return rows
    .filter((row) => {
      const events = JSON.parse(row.events) as string[];
      return events.includes('*') || events.includes(type);
    })
    .map((row) => ({ id: row.id, url: row.url, secret: row.secret, enabled: true }));
}

export async function findTarget(db: Kysely<DB>, id: string): Promise<EndpointTarget | undefined> {
  const row = await db.selectFrom('event_endpoints').select(['id', 'url', 'secret', 'enabled']).where('id', '=', id).executeTakeFirst();
  return row && { id: row.id, url: row.url, secret: row.secret, enabled: row.enabled === 1 };
}
