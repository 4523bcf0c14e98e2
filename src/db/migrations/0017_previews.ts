import type { Kysely } from 'kysely';

/**
 * Previews (issue 40): the ports of a machine made public, one row each; a
 * port without one is private. The preview token, signed links and their
 * cookies are HMACs under a key of `signing_keys` over the machine token's
 * hash, so nothing else is stored: rotating the machine token voids them all.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('public_preview_ports')
    .addColumn('machine_id', 'text', (col) => col.notNull().references('machines.id').onDelete('cascade'))
    .addColumn('port', 'integer', (col) => col.notNull())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('public_preview_ports_pk', ['machine_id', 'port'])
    .execute();
}
