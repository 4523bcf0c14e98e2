import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** Jobs of a kind that exist: due, scheduled or running. */
export async function countJobs(db: Kysely<DB>, kind: string): Promise<number> {
  const row = await db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .where('kind', '=', kind)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
