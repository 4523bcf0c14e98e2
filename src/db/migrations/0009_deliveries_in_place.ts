import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../connect.ts';
import type { DB } from '../database.ts';

/**
 * An attempt rewrites its delivery's outcome columns and nothing an index
 * reads, so PostgreSQL can update the row in place (a HOT update: no new
 * entry in any of its indexes). The recovery feeder's queue was a partial
 * index on `status` and `next_attempt_at`, which every attempt changes; it
 * now reads a column of its own, `unqueued`, set only while a recovered or
 * replayed delivery waits to be handed to its lane. On PostgreSQL each page
 * keeps a fifth free for the next version of its rows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('deliveries').addColumn('unqueued', 'integer').execute();
  await sql`update deliveries set unqueued = 1 where status = 'pending' and next_attempt_at is null`.execute(db);
  await db.schema.dropIndex('deliveries_unqueued').execute();
  await db.schema.createIndex('deliveries_unqueued').on('deliveries').columns(['endpoint_id', 'id']).where(sql.ref('unqueued'), '=', 1).execute();
  if (dialectOf(db as unknown as Kysely<DB>) === 'postgres') await sql`alter table deliveries set (fillfactor = 80)`.execute(db);
}
