import type { Kysely } from 'kysely';
import { dialectOf } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import { prepared } from '../db/prepared.ts';
import { findEnabledEndpoints, type EnabledEndpointRow } from '../event-webhooks/endpoints.repository.ts';
import type { EventsTable } from './events.tables.ts';

const insertEventQuery = prepared(5, (db, id: string, accountId: string, type: string, payload: string, createdAt: number) =>
  db.insertInto('events').values({ id, account_id: accountId, type, payload, created_at: createdAt }),
);

/** PostgreSQL runs a data-modifying CTE whether or not the query reads it. */
const insertEventReadingEndpointsQuery = prepared(5, (db, id: string, accountId: string, type: string, payload: string, createdAt: number) =>
  db
    .with('event', (cte) => cte.insertInto('events').values({ id, account_id: accountId, type, payload, created_at: createdAt }))
    .selectFrom('event_endpoints')
    .select(['id', 'url', 'secret', 'events'])
    .where('account_id', '=', accountId)
    .where('enabled', '=', 1)
    .forKeyShare(),
);

export async function insertEvent(db: Kysely<DB>, row: EventsTable): Promise<void> {
  await insertEventQuery.execute(db, row.id, row.account_id, row.type, row.payload, row.created_at);
}

/**
 * Stores the event and reads the account's enabled endpoints (as
 * findEnabledEndpoints does, lock included): one round trip on PostgreSQL,
 * where an emit's round trips are most of its cost.
 */
export async function insertEventReadingEndpoints(db: Kysely<DB>, row: EventsTable): Promise<EnabledEndpointRow[]> {
  if (dialectOf(db) === 'postgres') {
    return insertEventReadingEndpointsQuery.execute(db, row.id, row.account_id, row.type, row.payload, row.created_at);
  }
  await insertEvent(db, row);
  return findEnabledEndpoints(db, row.account_id);
}
