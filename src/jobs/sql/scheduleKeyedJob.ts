import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';
import type { JobsTable } from '../jobs.tables.ts';

/**
 * The one job of its key, due at `run_at`: inserted, or moved there with a
 * fresh count of attempts. A run of it under way loses its lease (its outcome
 * is not applied): the schedule set now is the newer word. The job takes the
 * new row's id, so the run under way, which settles by id, cannot touch it,
 * even when the same process has already claimed it again.
 */
export async function scheduleKeyedJob(db: Kysely<DB>, row: JobsTable): Promise<void> {
  await db
    .insertInto('jobs')
    .values(row)
    .onConflict((conflict) =>
      conflict
        .column('key')
        .where('key', 'is not', null)
        .doUpdateSet({ id: row.id, run_at: row.run_at, payload: row.payload, attempts: 0, locked_by: null, locked_until: null, last_error: null }),
    )
    .execute();
}
