import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';
import type { JobsTable } from '../jobs.tables.ts';

/** The job of its key, inserted only if none exists: a recurring job that every process ensures at start, without moving it. */
export async function ensureKeyedJob(db: Kysely<DB>, row: JobsTable): Promise<void> {
  await db
    .insertInto('jobs')
    .values(row)
    .onConflict((conflict) => conflict.column('key').where('key', 'is not', null).doNothing())
    .execute();
}
