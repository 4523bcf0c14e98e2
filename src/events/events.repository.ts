import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { prepared } from '../db/prepared.ts';
import type { EventsTable } from './events.tables.ts';

const insertEventQuery = prepared(5, (db, id: string, accountId: string, type: string, payload: string, createdAt: number) =>
  db.insertInto('events').values({ id, account_id: accountId, type, payload, created_at: createdAt }),
);

export async function insertEvent(db: Kysely<DB>, row: EventsTable): Promise<void> {
  await insertEventQuery.execute(db, row.id, row.account_id, row.type, row.payload, row.created_at);
}
