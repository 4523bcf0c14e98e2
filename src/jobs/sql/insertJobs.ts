import type { Kysely } from 'kysely';
import { insertAll, type AnyRows, type Columns } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';
import type { JobsTable } from '../jobs.tables.ts';

const COLUMNS: Columns<JobsTable> = [
  ['id', 'text'],
  ['kind', 'text'],
  ['lane', 'text'],
  ['key', 'text'],
  ['payload', 'text'],
  ['run_at', 'bigint'],
  ['attempts', 'integer'],
  ['locked_by', 'text'],
  ['locked_until', 'bigint'],
  ['last_error', 'text'],
  ['created_at', 'bigint'],
];

/**
 * New jobs, leased already when `locked_by` is set (handed over to this
 * process's runner after commit), written with the domain rows `alongside`
 * (an event and its deliveries) in one statement where the engine allows.
 */
export async function insertJobs(db: Kysely<DB>, rows: readonly JobsTable[], alongside: readonly AnyRows[] = []): Promise<void> {
  await insertAll(db, [...alongside, { table: 'jobs', columns: COLUMNS, rows } as unknown as AnyRows]);
}
