import type { Kysely } from 'kysely';

/**
 * Moves of machines off a draining host (`npm run hosts -- drain <name>
 * --move`): one row per machine, its step recorded before each part of the
 * move is done, so that a service killed in the middle finishes the move or
 * rolls it back when it starts again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('machine_moves')
    .addColumn('machine_id', 'text', (column) => column.primaryKey())
    .addColumn('from_host', 'text', (column) => column.notNull())
    .addColumn('to_host', 'text')
    .addColumn('step', 'text', (column) => column.notNull())
    .addColumn('prior_status', 'text')
    .addColumn('prior_status_changed_at', 'bigint')
    .addColumn('outcome', 'text')
    .addColumn('created_at', 'bigint', (column) => column.notNull())
    .addColumn('updated_at', 'bigint', (column) => column.notNull())
    .execute();
  await db.schema.createIndex('machine_moves_from_host').on('machine_moves').columns(['from_host', 'step']).execute();
}
