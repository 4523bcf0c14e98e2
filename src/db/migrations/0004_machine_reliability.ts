import { sql, type Kysely } from 'kysely';

/**
 * What the machine worker and run executor need to survive a failing host or
 * a dying process: per-item retry state, a pending stop or destroy recorded
 * before the host is asked, run leases, and the inbound-webhook replay guard.
 * SQLite adds one column per ALTER TABLE, hence one statement each.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // A stop or destroy recorded (status `stopping`) before the host is asked, so a process that dies mid-way leaves work another can finish.
  await db.schema.alterTable('machines').addColumn('pending_action', 'text').execute();
  await db.schema.alterTable('machines').addColumn('pending_reason', 'text').execute();
  // Consecutive host failures for this machine, and when the worker may try its expiry again.
  await db.schema.alterTable('machines').addColumn('failures', 'integer', (col) => col.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('machines').addColumn('retry_at', 'bigint').execute();

  await db.schema.alterTable('schedules').addColumn('failures', 'integer', (col) => col.notNull().defaultTo(0)).execute();

  await db.schema.alterTable('pools').addColumn('failures', 'integer', (col) => col.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('pools').addColumn('retry_at', 'bigint').execute();

  // The process executing a run, and until when it has promised to be alive.
  await db.schema.alterTable('runs').addColumn('owner', 'text').execute();
  await db.schema.alterTable('runs').addColumn('lease_until', 'bigint').execute();
  await db.schema.createIndex('runs_running_lease').on('runs').column('lease_until').where(sql.ref('status'), '=', 'running').execute();

  await db.schema
    .createTable('inbound_webhook_receipts')
    .addColumn('hook_id', 'text', (col) => col.notNull().references('inbound_webhooks.id').onDelete('cascade'))
    .addColumn('signature', 'text', (col) => col.notNull())
    // No foreign key: the receipt is written first, before the run it names, so that a replay is refused before anything is booted.
    .addColumn('run_id', 'text', (col) => col.notNull())
    .addColumn('expires_at', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('inbound_webhook_receipts_pkey', ['hook_id', 'signature'])
    .execute();
  await db.schema.createIndex('inbound_webhook_receipts_expiry').on('inbound_webhook_receipts').column('expires_at').execute();
}
