import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** Removes the job of this key, if any; a run of it under way finds nothing to settle. */
export async function cancelKeyedJob(db: Kysely<DB>, key: string): Promise<void> {
  await db.deleteFrom('jobs').where('key', '=', key).execute();
}
