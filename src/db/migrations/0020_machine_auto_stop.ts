import { sql, type Kysely } from 'kysely';

/**
 * Idle stop (issue 41): a machine's `autoStopMinutes` (0: never)
 * and the last moment of activity recorded for it (src/machines/activity.ts
 * says what counts; null: none since the column came). Machines made before
 * keep running as they were promised (0); new ones are given a value by the
 * service (15 unless asked otherwise). `runs_unfinished` lets the idle check
 * ask "does a run still run on this machine?" without walking its history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('machines').addColumn('auto_stop_minutes', 'integer', (col) => col.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('machines').addColumn('last_active_at', 'bigint').execute();
  await db.schema
    .createIndex('runs_unfinished')
    .on('runs')
    .column('machine_id')
    .where(sql.ref('status'), 'in', sql`('pending', 'running')`)
    .execute();
}
