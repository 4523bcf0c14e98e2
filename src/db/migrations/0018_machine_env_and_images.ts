import type { Kysely } from 'kysely';

/**
 * The image a machine was created from, by its name in MACHINE_IMAGES
 * (`default`: MACHINE_IMAGE). A machine's environment (issue 41): its names in clear (answers show them),
 * the whole of it sealed (AES-256-GCM under SECRETS_KEY, shared/sealing.ts);
 * null when none was given.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('machines').addColumn('env_names', 'text', (col) => col.notNull().defaultTo('[]')).execute();
  await db.schema.alterTable('machines').addColumn('env_sealed', 'text').execute();
  await db.schema.alterTable('machines').addColumn('image', 'text', (col) => col.notNull().defaultTo('default')).execute();
}
