import type { Kysely } from 'kysely';
import { updateRows, type Columns } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';

export interface Rescheduled {
  id: string;
  run_at: number;
  attempts: number;
  last_error: string | null;
}

const COLUMNS: Columns<Rescheduled> = [
  ['id', 'text'],
  ['run_at', 'bigint'],
  ['attempts', 'integer'],
  ['last_error', 'text'],
];

/** Jobs `runner` still holds, due again at their `run_at` (a retry, or later work) and leased to no one; answers their ids. */
export async function rescheduleJobs(db: Kysely<DB>, runner: string, rows: readonly Rescheduled[]): Promise<string[]> {
  return updateRows(db, 'jobs', COLUMNS, rows, {
    also: 'locked_by = null, locked_until = null',
    where: { locked_by: runner },
    returning: true,
  });
}
