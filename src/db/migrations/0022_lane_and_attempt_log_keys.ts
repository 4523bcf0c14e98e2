import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../connect.ts';
import type { DB } from '../database.ts';

/**
 * Gives PostgreSQL back the keys 0010 took off it (issue 42): a job's lane
 * (`jobs.lane` → `job_lanes`, its jobs deleted with it) and an attempt-log
 * entry's delivery (`delivery_attempts.delivery_id` → `deliveries`, the log
 * deleted with it, instead of 0010's trigger). What the code kept consistent
 * by the order of its statements the database now checks; bench/alternate.sh
 * measured no cost above the noise (docs/architecture.md). The delivery's one
 * key to its endpoint and account together stays: it checks all that the two
 * keys it replaced did, and that the account is the endpoint's.
 *
 * Rows that break a key can only come from a bug or a hand-made change, but
 * the migration must not fail on them, nor lose work:
 * - A job whose lane row is missing gets it back when the lane's owner (an
 *   endpoint) still exists, paused as the endpoint is, so its deliveries go on.
 * - A delivery job whose endpoint and delivery are both gone is deleted: the
 *   runner would drop it unattempted anyway (its subject is gone).
 * - Any other job whose lane row is missing gets it back, open.
 * - An attempt-log entry whose delivery is gone is deleted: the log is read
 *   only through its delivery, and the trigger would have deleted it with it.
 * Each key is added NOT VALID first, so that rows written from then on are
 * checked while the old ones are mended, then validated.
 * SQLite kept its keys (0010 took none there): nothing to do.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (dialectOf(db as unknown as Kysely<DB>) !== 'postgres') return;
  await sql`alter table jobs add constraint jobs_lane_fkey foreign key (lane) references job_lanes (lane) on delete cascade not valid`.execute(db);
  await sql`
    insert into job_lanes (lane, paused)
    select e.id, 1 - e.enabled from event_endpoints e
    where exists (select 1 from jobs j where j.lane = e.id) and not exists (select 1 from job_lanes l where l.lane = e.id)
  `.execute(db);
  await sql`
    delete from jobs j
    where j.kind = 'webhook.delivery' and j.lane is not null
      and not exists (select 1 from job_lanes l where l.lane = j.lane)
      and not exists (select 1 from event_endpoints e where e.id = j.lane)
      and not exists (select 1 from deliveries d where d.id = j.id)
  `.execute(db);
  await sql`
    insert into job_lanes (lane, paused)
    select distinct j.lane, 0 from jobs j
    where j.lane is not null and not exists (select 1 from job_lanes l where l.lane = j.lane)
  `.execute(db);
  await sql`alter table jobs validate constraint jobs_lane_fkey`.execute(db);

  await sql`alter table delivery_attempts add constraint delivery_attempts_delivery_id_fkey foreign key (delivery_id) references deliveries (id) on delete cascade not valid`.execute(db);
  await sql`drop trigger deliveries_delete_attempt_logs on deliveries`.execute(db);
  await sql`drop function delete_attempt_logs()`.execute(db);
  await sql`delete from delivery_attempts a where not exists (select 1 from deliveries d where d.id = a.delivery_id)`.execute(db);
  await sql`alter table delivery_attempts validate constraint delivery_attempts_delivery_id_fkey`.execute(db);
}
