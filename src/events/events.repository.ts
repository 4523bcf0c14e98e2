import type { Kysely } from 'kysely';
import { insertRows, type AnyRows, type Columns } from '../db/batch.ts';
import type { DB } from '../db/database.ts';
import type { EventsTable } from './events.tables.ts';

const COLUMNS: Columns<EventsTable> = [
  ['id', 'text'],
  ['account_id', 'text'],
  ['type', 'text'],
  ['payload', 'text'],
  ['machine_id', 'text'],
  ['created_at', 'bigint'],
];

export async function insertEvent(db: Kysely<DB>, row: EventsTable): Promise<void> {
  await insertRows(db, 'events', COLUMNS, [row]);
}

/** The event's row, for a write that stores it along with other rows (its deliveries and their jobs). */
export function eventRows(row: EventsTable): AnyRows {
  return { table: 'events', columns: COLUMNS, rows: [row] } as unknown as AnyRows;
}

/**
 * An account's events of these types, newest first: one walk of the
 * (account, type, id) index per type, each stopping at `limit`, merged (as
 * the deliveries listing merges its endpoints' walks). With `machineId`, one
 * walk of that machine's events instead (its own index), the types a filter.
 */
export async function listEventRows(
  db: Kysely<DB>,
  accountId: string,
  types: readonly string[],
  limit: number,
  before: string | undefined,
  machineId?: string,
): Promise<EventsTable[]> {
  if (types.length === 0) return [];
  if (machineId !== undefined) {
    let query = db.selectFrom('events').selectAll().where('machine_id', '=', machineId).where('account_id', '=', accountId).where('type', 'in', types);
    if (before !== undefined) query = query.where('id', '<', before);
    return query.orderBy('id', 'desc').limit(limit).execute();
  }
  const newestOf = (type: string) => {
    let query = db.selectFrom('events').selectAll().where('account_id', '=', accountId).where('type', '=', type);
    if (before !== undefined) query = query.where('id', '<', before);
    return db.selectFrom(query.orderBy('id', 'desc').limit(limit).as('newest')).selectAll();
  };
  if (types.length === 1) return newestOf(types[0]!).execute();
  const [first, ...rest] = types.map(newestOf);
  const merged = rest.reduce((union, next) => union.unionAll(next), first!);
  return db.selectFrom(merged.as('merged')).selectAll().orderBy('id', 'desc').limit(limit).execute();
}

export async function findEventRow(db: Kysely<DB>, accountId: string, id: string): Promise<EventsTable | undefined> {
  return db.selectFrom('events').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** The ids of an account's events of one type in [fromId, toId), oldest first, after `after`. */
export async function eventIdsInWindow(
  db: Kysely<DB>,
  accountId: string,
  type: string,
  fromId: string,
  toId: string,
  after: string | undefined,
  limit: number,
): Promise<string[]> {
  let query = db.selectFrom('events').select('id').where('account_id', '=', accountId).where('type', '=', type).where('id', '>=', fromId).where('id', '<', toId);
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

/** Events made before `before`, a batch for retention: their ids after `after`, in order. */
export async function eventIdsBefore(db: Kysely<DB>, before: string, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('events').select('id').where('id', '<', before);
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

/**
 * Deletes these events, except those a delivery still refers to: a pending
 * one carries it, and finished ones go first (retention deletes them by
 * their own age), so every deleted row is counted. Answers how many.
 */
export async function deleteEventsWithoutDeliveries(db: Kysely<DB>, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db
    .deleteFrom('events')
    .where('id', 'in', ids)
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('deliveries').select('deliveries.id').whereRef('deliveries.event_id', '=', 'events.id'))),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
