import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** The kind's lanes, not paused, that have jobs due and leased to no one: where a runner has work. One index probe per lane. */
export async function dueLanes(db: Kysely<DB>, kind: string, now: number): Promise<string[]> {
  const rows = await db
    .selectFrom('job_lanes as l')
    .select('l.lane')
    .where('l.paused', '=', 0)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('jobs as j')
          .select(sql.lit(1).as('one'))
          .whereRef('j.lane', '=', 'l.lane')
          .where('j.kind', '=', kind)
          .where('j.run_at', '<=', now)
          .where((eb) => eb.or([eb('j.locked_until', 'is', null), eb('j.locked_until', '<', now)])),
      ),
    )
    .execute();
  return rows.map((row) => row.lane);
}
