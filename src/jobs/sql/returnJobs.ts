import type { Kysely } from 'kysely';
import { isOneOf } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';

/** Gives jobs back unattempted, for any process to take: these ids, or every job `runner` holds. */
export async function returnJobs(db: Kysely<DB>, runner: string, ids?: readonly string[]): Promise<void> {
  if (ids !== undefined && ids.length === 0) return;
  let query = db.updateTable('jobs').set({ locked_by: null, locked_until: null }).where('locked_by', '=', runner);
  if (ids !== undefined) query = query.where(isOneOf(db, 'id', ids));
  await query.execute();
}
