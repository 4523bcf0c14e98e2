import type { Kysely } from 'kysely';

/**
 * Runs on real machines: where and how a command runs (its
 * working directory, added environment, timeout) and what it wrote, each
 * stream apart, as the machine reports it. Runs made before keep their
 * combined output; their streams are null.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').addColumn('cwd', 'text').execute();
  await db.schema.alterTable('runs').addColumn('env', 'text', (col) => col.notNull().defaultTo('{}')).execute();
  await db.schema.alterTable('runs').addColumn('timeout_ms', 'integer', (col) => col.notNull().defaultTo(600_000)).execute();
  await db.schema.alterTable('runs').addColumn('stdout', 'text').execute();
  await db.schema.alterTable('runs').addColumn('stderr', 'text').execute();
  await db.schema.alterTable('runs').addColumn('truncated', 'integer', (col) => col.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('runs').addColumn('timed_out', 'integer', (col) => col.notNull().defaultTo(0)).execute();
}
