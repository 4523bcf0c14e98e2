import type { Kysely } from 'kysely';
import { insertAll, insertEach, type AnyRows, type AnyRowsPerSourceRow, type Columns, type Source } from '../../db/batch.ts';
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

/** New jobs, leased already when `locked_by` is set (handed over to this process's runner after commit). */
export async function insertJobs(db: Kysely<DB>, rows: readonly JobsTable[]): Promise<void> {
  await insertAll(db, [{ table: 'jobs', columns: COLUMNS, rows } as unknown as AnyRows]);
}

/**
 * A job like `template` for each row of `source`, its id and lane read from
 * the source's `id` and `lane` columns, written with the domain rows chosen
 * by the same source (`alongside`: an event, and a delivery per endpoint), in
 * one statement where the engine allows. Answers the jobs' ids and lanes.
 */
export async function insertJobsEach(
  db: Kysely<DB>,
  source: Source,
  template: JobsTable,
  alongside: { fixed: readonly AnyRows[]; each: readonly AnyRowsPerSourceRow[] },
): Promise<Array<{ id: string; lane: string | null }>> {
  const jobs = { table: 'jobs', columns: COLUMNS, template, taken: { id: 'id', lane: 'lane' } } as unknown as AnyRowsPerSourceRow;
  return insertEach(db, source, alongside.fixed, [...alongside.each, jobs], ['id', 'lane']);
}
