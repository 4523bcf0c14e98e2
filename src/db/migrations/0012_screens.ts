import type { Kysely } from 'kysely';

/** A machine's screen size, chosen at create; null: the default. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('machines').addColumn('screen_width', 'integer').execute();
  await db.schema.alterTable('machines').addColumn('screen_height', 'integer').execute();
}
