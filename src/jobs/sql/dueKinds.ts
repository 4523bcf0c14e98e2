import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** The kinds that have jobs without a lane due and leased to no one. */
export async function dueKinds(db: Kysely<DB>, now: number): Promise<string[]> {
  const rows = await db
    .selectFrom('jobs')
    .select('kind')
    .distinct()
    .where('lane', 'is', null)
    .where('run_at', '<=', now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
    .execute();
  return rows.map((row) => row.kind);
}
