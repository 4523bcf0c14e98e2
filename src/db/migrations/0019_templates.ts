import type { Kysely } from 'kysely';

/**
 * Templates (issue 41): a machine's disk saved under a name of the account.
 * The disk itself lives on the machine host (with Docker, an image tagged
 * with the template's id: docs/architecture.md); the row says what the API
 * shows, and carries the source machine's environment (its names in clear,
 * the whole sealed, as machines keep theirs) because the saved disk holds it
 * too. A machine or a warm pool made from a template names it; a pool's
 * template cannot be deleted.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('templates')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('source_machine_id', 'text', (col) => col.notNull())
    .addColumn('image', 'text', (col) => col.notNull())
    .addColumn('size_bytes', 'bigint', (col) => col.notNull())
    .addColumn('env_names', 'text', (col) => col.notNull().defaultTo('[]'))
    .addColumn('env_sealed', 'text')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('templates_account_name').on('templates').columns(['account_id', 'name']).unique().execute();
  await db.schema.alterTable('machines').addColumn('template_id', 'text').execute();
  await db.schema.alterTable('pools').addColumn('template_id', 'text').execute();
  await db.schema.createIndex('pools_template').on('pools').column('template_id').execute();
}
