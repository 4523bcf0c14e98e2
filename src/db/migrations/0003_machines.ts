import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('pools')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('size', 'text', (col) => col.notNull())
    .addColumn('count', 'integer', (col) => col.notNull())
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addColumn('updated_at', 'bigint', (col) => col.notNull())
    .addUniqueConstraint('pools_account_name', ['account_id', 'name'])
    .execute();

  await db.schema
    .createTable('machines')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('size', 'text', (col) => col.notNull())
    .addColumn('external_id', 'text', (col) => col.notNull())
    .addColumn('labels', 'text', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull())
    .addColumn('status_changed_at', 'bigint', (col) => col.notNull())
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('check_at', 'bigint')
    .addColumn('booted_at', 'bigint')
    .addColumn('pool_id', 'text', (col) => col.references('pools.id').onDelete('set null'))
    .addColumn('on_expire', 'text', (col) => col.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('expired_at', 'bigint')
    .addColumn('mcp_token_hash', 'text', (col) => col.unique())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addColumn('updated_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('machines_account').on('machines').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('machines_pool').on('machines').columns(['pool_id', 'status']).execute();
  // The worker's queues: machines the provider must be asked about, and machines still to expire.
  await db.schema.createIndex('machines_check_due').on('machines').column('check_at').where(sql.ref('check_at'), 'is not', null).execute();
  await db.schema
    .createIndex('machines_expiry_due')
    .on('machines')
    .column('expires_at')
    .where(sql.ref('expired_at'), 'is', null)
    .execute();

  await db.schema
    .createTable('runs')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('machine_id', 'text', (col) => col.notNull().references('machines.id').onDelete('cascade'))
    .addColumn('source', 'text', (col) => col.notNull())
    .addColumn('source_id', 'text')
    .addColumn('source_name', 'text')
    .addColumn('command', 'text', (col) => col.notNull())
    .addColumn('stop_after', 'integer', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull())
    .addColumn('exit_code', 'integer')
    .addColumn('output', 'text')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('finished_at', 'bigint')
    .execute();
  await db.schema.createIndex('runs_machine').on('runs').columns(['machine_id', 'id']).execute();
  await db.schema.createIndex('runs_pending').on('runs').columns(['machine_id', 'id']).where(sql.ref('status'), '=', 'pending').execute();

  await db.schema
    .createTable('schedules')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('machine_id', 'text', (col) => col.notNull().references('machines.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('cron', 'text', (col) => col.notNull())
    .addColumn('command', 'text', (col) => col.notNull())
    .addColumn('stop_after', 'integer', (col) => col.notNull())
    .addColumn('next_run_at', 'bigint', (col) => col.notNull())
    .addColumn('last_run_at', 'bigint')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('schedules_account').on('schedules').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('schedules_due').on('schedules').column('next_run_at').execute();

  await db.schema
    .createTable('inbound_webhooks')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('machine_id', 'text', (col) => col.notNull().references('machines.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('command', 'text', (col) => col.notNull())
    .addColumn('stop_after', 'integer', (col) => col.notNull())
    .addColumn('token_hash', 'text', (col) => col.notNull().unique())
    .addColumn('secret', 'text', (col) => col.notNull())
    .addColumn('last_triggered_at', 'bigint')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('inbound_webhooks_account').on('inbound_webhooks').columns(['account_id', 'id']).execute();

  await db.schema
    .createTable('live_views')
    .addColumn('token_hash', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('machine_id', 'text', (col) => col.notNull().references('machines.id').onDelete('cascade'))
    .addColumn('expires_at', 'bigint', (col) => col.notNull())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('live_views_expiry').on('live_views').column('expires_at').execute();
}
