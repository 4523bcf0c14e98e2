import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** Jobs in a lane (due, scheduled or running), counted up to `cap`: an index walk that stops there. */
export async function countLaneJobs(db: Kysely<DB>, lane: string, cap: number): Promise<number> {
  const { rows } = await sql<{ count: number | string }>`select count(*) as count from (select 1 from jobs where lane = ${lane} limit ${cap}) as waiting`.execute(db);
  return Number(rows[0]?.count ?? 0);
}
