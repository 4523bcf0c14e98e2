import { sql, type Kysely } from 'kysely';

/**
 * Whether the operator drained a host (1) or not (0), kept apart from its
 * state: a draining host that is lost and answers again returns to
 * `draining`, not `active`, since the operator's word has not changed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('hosts').addColumn('drained', 'integer', (column) => column.notNull().defaultTo(0)).execute();
  await sql`UPDATE hosts SET drained = 1 WHERE state = 'draining'`.execute(db);
}
