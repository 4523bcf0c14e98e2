import { sql, type Kysely } from 'kysely';

/**
 * Hosts: the Docker engines machines are placed on, each a record an
 * operator adds (`npm run hosts`, MACHINE_HOSTS), with its state (`active`,
 * `draining`, `lost`), labels and the capacity its engine reported; and each
 * machine's host. Machines from before have none: they live on the one engine
 * of that time, the host `local`; so do templates (an image on that engine).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('hosts')
    .addColumn('name', 'text', (column) => column.primaryKey())
    .addColumn('address', 'text', (column) => column.notNull())
    .addColumn('state', 'text', (column) => column.notNull())
    .addColumn('labels', 'text', (column) => column.notNull().defaultTo('{}'))
    .addColumn('cpus', 'real', (column) => column.notNull())
    .addColumn('memory_bytes', 'bigint', (column) => column.notNull())
    .addColumn('disk_bytes', 'bigint')
    .addColumn('created_at', 'bigint', (column) => column.notNull())
    .addColumn('state_changed_at', 'bigint', (column) => column.notNull())
    .addColumn('last_seen_at', 'bigint')
    .execute();
  await db.schema.alterTable('machines').addColumn('host', 'text').execute();
  await sql`UPDATE machines SET host = 'local'`.execute(db);
  // A template's disk is an image on the engine that saved it.
  await db.schema.alterTable('templates').addColumn('host', 'text').execute();
  await sql`UPDATE templates SET host = 'local'`.execute(db);
  await db.schema.createIndex('machines_host_status').on('machines').columns(['host', 'status']).execute();
}
