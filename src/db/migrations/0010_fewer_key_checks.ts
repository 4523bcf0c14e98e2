import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../connect.ts';
import type { DB } from '../database.ts';

/**
 * PostgreSQL checks a foreign key with a query of its own for every row
 * written, locking the row it points to (a shared row, an account's or a
 * lane's, is locked by every concurrent writer): a fifth of the server's
 * work per delivery (bench/RESULTS.md). Three of a delivery's four checks go;
 * what they guaranteed stays:
 * - A delivery's account and endpoint are one key, to the endpoint and its
 *   account together: one check instead of two, and a delivery can no longer
 *   name an account other than its endpoint's. Deleting the account still
 *   deletes its endpoints, and they their deliveries.
 * - A lane's jobs are deleted by closing the lane (closeLane), the only way a
 *   lane ends; jobs are queued in a lane only while its owner (an endpoint) is
 *   locked, which its delete locks first.
 * - An attempt-log entry is written in the statement that updates its
 *   delivery (whose row lock keeps it from being deleted meanwhile); a
 *   trigger deletes a delivery's log with it, however it is deleted.
 * SQLite, whose checks are index probes in the process, keeps its keys.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (dialectOf(db as unknown as Kysely<DB>) !== 'postgres') return;
  await sql`create unique index event_endpoints_id_account on event_endpoints (id, account_id)`.execute(db);
  await sql`
    alter table deliveries
      drop constraint deliveries_account_id_fkey,
      drop constraint deliveries_endpoint_id_fkey,
      add constraint deliveries_endpoint_account_fkey foreign key (endpoint_id, account_id) references event_endpoints (id, account_id) on delete cascade
  `.execute(db);
  await sql`alter table jobs drop constraint jobs_lane_fkey`.execute(db);
  await sql`alter table delivery_attempts drop constraint delivery_attempts_delivery_id_fkey`.execute(db);
  await sql`
    create function delete_attempt_logs() returns trigger language plpgsql set search_path from current as $$
    begin
      -- An array, so that the planner probes the log's key for each id: it knows nothing of the transition table's size.
      delete from delivery_attempts where delivery_id = any(array(select id from deleted));
      return null;
    end $$
  `.execute(db);
  await sql`
    create trigger deliveries_delete_attempt_logs after delete on deliveries
      referencing old table as deleted for each statement execute function delete_attempt_logs()
  `.execute(db);
}
