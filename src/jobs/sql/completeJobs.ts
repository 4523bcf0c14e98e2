import { sql, type Kysely } from 'kysely';
import { isOneOf } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';

/** Deletes finished jobs (done, or given up) that `runner` still holds; answers their ids. Once per batch of attempts, hence a template. */
export async function completeJobs(db: Kysely<DB>, runner: string, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<{ id: string }>`delete from jobs where ${isOneOf(db, 'id', ids)} and locked_by = ${runner} returning id`.execute(db);
  return rows.map((row) => row.id);
}
