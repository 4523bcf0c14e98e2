import type { Kysely } from 'kysely';
import { insertRows, type AnyRows, type Columns } from '../db/batch.ts';
import type { DB } from '../db/database.ts';
import type { EventsTable } from './events.tables.ts';

const COLUMNS: Columns<EventsTable> = [
  ['id', 'text'],
  ['account_id', 'text'],
  ['type', 'text'],
  ['payload', 'text'],
  ['created_at', 'bigint'],
];

export async function insertEvent(db: Kysely<DB>, row: EventsTable): Promise<void> {
  await insertRows(db, 'events', COLUMNS, [row]);
}

/** The event's row, for a write that stores it along with other rows (its deliveries and their jobs). */
export function eventRows(row: EventsTable): AnyRows {
  return { table: 'events', columns: COLUMNS, rows: [row] } as unknown as AnyRows;
}
