import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../../db/connect.ts';
import type { DB } from '../../db/database.ts';
import { CLAIMED_COLUMNS, type ClaimedRow } from './job-row.ts';

export interface Claim {
  kind: string;
  /** A lane's jobs (a paused lane gives none), or null for the kind's jobs without a lane. */
  lane: string | null;
  runner: string;
  now: number;
  leaseUntil: number;
  limit: number;
}

/** Jobs due and leased to no one (or whose lease has run out), oldest first. */
function dueJobs(db: Kysely<DB>, claim: Claim) {
  let due = db
    .selectFrom('jobs')
    .select('id')
    .where('kind', '=', claim.kind)
    .where('run_at', '<=', claim.now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', claim.now)]));
  due =
    claim.lane === null
      ? due.where('lane', 'is', null)
      : due.where('lane', '=', claim.lane).where(({ exists, selectFrom }) =>
          exists(selectFrom('job_lanes').select(sql.lit(1).as('one')).where('lane', '=', claim.lane).where('paused', '=', 0)),
        );
  due = due.orderBy('run_at').orderBy('id').limit(claim.limit);
  // PostgreSQL: rows another process is claiming are skipped, not waited for. SQLite runs one writer at a time.
  return dialectOf(db) === 'postgres' ? due.forUpdate().skipLocked() : due;
}

/** Leases up to `limit` due jobs to `runner` until `leaseUntil`. */
export async function claimJobs(db: Kysely<DB>, claim: Claim): Promise<ClaimedRow[]> {
  const rows = await db
    .updateTable('jobs')
    .set({ locked_by: claim.runner, locked_until: claim.leaseUntil })
    .where('id', 'in', dueJobs(db, claim))
    .returning([...CLAIMED_COLUMNS])
    .execute();
  return rows.sort((a, b) => a.run_at - b.run_at || (a.id < b.id ? -1 : 1));
}
