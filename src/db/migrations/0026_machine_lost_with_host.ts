import { sql, type Kysely } from 'kysely';

/**
 * Whether a machine's record waits for its lost host to answer again (1): in
 * `error` since the host was lost (set to what it really is once the host is
 * back), or destroyed while the host was silent (its container removed then).
 * Other errors are left alone when a host comes back.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('machines').addColumn('lost_with_host', 'integer', (column) => column.notNull().defaultTo(0)).execute();
  // The host watch asks each answering host for these on every pass: a few rows at most, never a scan of a host's machines.
  await db.schema.createIndex('machines_lost_with_host').on('machines').column('host').where(sql.ref('lost_with_host'), '=', 1).execute();
}
