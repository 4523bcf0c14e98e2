import { CompiledQuery, sql, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { dialectOf } from '../db/connect.ts';
import { isOneOf } from '../db/batch.ts';
import { toIso } from '../shared/clock.ts';
import type { EventEndpointsTable } from './event-webhooks.tables.ts';

export interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  /** 'failing' when the service disabled it; null otherwise, a manual pause included. */
  disabledReason: 'failing' | null;
  disabledAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** What the delivery worker needs to send to an endpoint. */
export interface EndpointTarget {
  id: string;
  url: string;
  secret: string;
  enabled: boolean;
  /** The endpoint's failing clock as last read or written by this process (see trackFailing in delivery.job.ts). */
  failingSince: number | null;
}

/** The event types an endpoint's stored `events` column subscribes to (a JSON array). */
export function eventsOf(column: string): string[] {
  return JSON.parse(column) as string[];
}

export function toEndpoint(row: EventEndpointsTable): Endpoint {
  return {
    id: row.id,
    url: row.url,
    events: eventsOf(row.events),
    description: row.description,
    enabled: row.enabled === 1,
    disabledReason: row.disabled_reason === 'failing' ? 'failing' : null,
    disabledAt: row.disabled_at === null ? null : toIso(Number(row.disabled_at)),
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
  changes: Partial<Pick<EventEndpointsTable, 'url' | 'events' | 'description' | 'enabled' | 'secret' | 'disabled_reason' | 'disabled_at' | 'failing_since' | 'warned_at'>> & { updated_at: number },
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

/** Who receives what. */
export function subscribes(events: readonly string[], type: string): boolean {
  return events.includes('*') || events.includes(type);
}

/**
 * The account's enabled endpoints that want this event type (`subscribes`),
 * in id order. On PostgreSQL they are locked as the deliveries' foreign key
 * would lock them, until the transaction ends: a delete of one waits for it
 * (and then cancels the new delivery) instead of failing it. SQLite's writers
 * already run one at a time.
 */
export async function subscribedEndpointIds(db: Kysely<DB>, accountId: string, type: string): Promise<string[]> {
  // Written as text: every emit runs it, and building it with the query builder cost more than running it.
  const { rows } = await db.executeQuery<Pick<EventEndpointsTable, 'id' | 'events'>>(CompiledQuery.raw(ENABLED_ENDPOINTS[dialectOf(db)], [accountId]));
  return rows.filter((row) => subscribes(eventsOf(row.events), type)).map((row) => row.id);
}

const ENABLED_ENDPOINTS = {
  sqlite: 'select id, events from event_endpoints where account_id = ? and enabled = 1 order by id',
  postgres: 'select id, events from event_endpoints where account_id = $1 and enabled = 1 order by id for key share',
};

export async function findTarget(db: Kysely<DB>, id: string): Promise<EndpointTarget | undefined> {
  const row = await db.selectFrom('event_endpoints').select(['id', 'url', 'secret', 'enabled', 'failing_since']).where('id', '=', id).executeTakeFirst();
  return row && { id: row.id, url: row.url, secret: row.secret, enabled: row.enabled === 1, failingSince: row.failing_since === null ? null : Number(row.failing_since) };
}

/**
 * Locks these endpoints as their deliveries' foreign key would, in id order,
 * for a transaction that goes on to touch their lanes' jobs: an endpoint's
 * delete locks the endpoint first too, then takes its deliveries and its
 * lane's jobs with it, so the two wait for each other at the endpoint instead
 * of each holding what the other needs. SQLite writers already run one at a time.
 */
export async function lockEndpoints(db: Kysely<DB>, ids: readonly string[]): Promise<void> {
  if (ids.length === 0 || dialectOf(db) !== 'postgres') return;
  await db.selectFrom('event_endpoints').select('id').where(isOneOf(db, 'id', ids)).orderBy('id').forKeyShare().execute();
}

/**
 * The failing clock (auto-disable): a success stops it (and
 * restarts it at `firstFailureAfter`, a failure later in the same batch),
 * failures start it unless it runs already.
 */
export async function resetFailingClock(db: Kysely<DB>, id: string, firstFailureAfter: number | null): Promise<void> {
  await db.updateTable('event_endpoints').set({ failing_since: firstFailureAfter, warned_at: null }).where('id', '=', id).execute();
}

export async function startFailingClock(db: Kysely<DB>, id: string, at: number): Promise<void> {
  await db.updateTable('event_endpoints').set({ failing_since: at }).where('id', '=', id).where('failing_since', 'is', null).execute();
}

/** An endpoint by id alone, whoever owns it (background work that starts from the id). */
export async function findEndpointById(db: Kysely<DB>, id: string): Promise<EventEndpointsTable | undefined> {
  return db.selectFrom('event_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Enabled endpoints whose failing clock runs (a partial index holds just these). */
export async function findFailingEndpoints(db: Kysely<DB>): Promise<Array<Pick<EventEndpointsTable, 'id' | 'account_id' | 'url' | 'failing_since' | 'warned_at'>>> {
  return db
    .selectFrom('event_endpoints')
    .select(['id', 'account_id', 'url', 'failing_since', 'warned_at'])
    .where('failing_since', 'is not', null)
    .where('enabled', '=', 1)
    .execute();
}

/** Disabled for failing, if still enabled and failing since `failingSince` (nothing changed meanwhile). */
export async function disableFailing(db: Kysely<DB>, id: string, failingSince: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('event_endpoints')
    .set({ enabled: 0, disabled_reason: 'failing', disabled_at: now, updated_at: now })
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .where('failing_since', '=', failingSince)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Marks the owner warned, once per failing spell. */
export async function markWarned(db: Kysely<DB>, id: string, failingSince: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('event_endpoints')
    .set({ warned_at: now })
    .where('id', '=', id)
    .where('warned_at', 'is', null)
    .where('failing_since', '=', failingSince)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
