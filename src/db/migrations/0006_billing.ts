import { sql, type Kysely } from 'kysely';

/**
 * Billing: one billing row per account (balance, card, welcome
 * credit), the append-only ledger, one meter per machine that ever ran, and
 * the answers kept for top-ups sent with an Idempotency-Key.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('billing_accounts')
    .addColumn('account_id', 'text', (col) => col.primaryKey().references('accounts.id').onDelete('cascade'))
    .addColumn('balance_micros', 'bigint', (col) => col.notNull())
    .addColumn('welcome_granted_at', 'bigint')
    .addColumn('card_reference', 'text')
    .addColumn('card_brand', 'text')
    .addColumn('card_last4', 'text')
    .addColumn('card_exp_month', 'integer')
    .addColumn('card_exp_year', 'integer')
    .addColumn('card_created_at', 'bigint')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addColumn('updated_at', 'bigint', (col) => col.notNull())
    .execute();

  await db.schema
    .createTable('billing_ledger')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('kind', 'text', (col) => col.notNull())
    .addColumn('amount_micros', 'bigint', (col) => col.notNull())
    .addColumn('balance_after_micros', 'bigint', (col) => col.notNull())
    .addColumn('machine_id', 'text')
    .addColumn('period_start', 'bigint')
    .addColumn('period_end', 'bigint')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('billing_ledger_account').on('billing_ledger').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('billing_ledger_machine').on('billing_ledger').columns(['machine_id', 'period_end']).where(sql.ref('machine_id'), 'is not', null).execute();
  // The welcome credit, once per account: two processes granting it at the same instant cannot both commit.
  await db.schema
    .createIndex('billing_ledger_one_welcome_credit')
    .on('billing_ledger')
    .column('account_id')
    .unique()
    .where(sql.ref('kind'), '=', sql.lit('welcome_credit'))
    .execute();

  await db.schema
    .createTable('billing_meters')
    .addColumn('machine_id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('size', 'text', (col) => col.notNull())
    .addColumn('price_micros', 'bigint', (col) => col.notNull())
    .addColumn('metered_until', 'bigint')
    .addColumn('metered_ms', 'bigint', (col) => col.notNull())
    .addColumn('charged_micros', 'bigint', (col) => col.notNull())
    .addColumn('updated_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('billing_meters_running').on('billing_meters').columns(['metered_until']).where(sql.ref('metered_until'), 'is not', null).execute();
  await db.schema.createIndex('billing_meters_account').on('billing_meters').columns(['account_id']).execute();

  await db.schema
    .createTable('billing_idempotency')
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('key', 'text', (col) => col.notNull())
    .addColumn('amount_micros', 'bigint', (col) => col.notNull())
    .addColumn('transaction_id', 'text')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('billing_idempotency_pk', ['account_id', 'key'])
    .execute();
  await db.schema.createIndex('billing_idempotency_age').on('billing_idempotency').column('created_at').execute();
}
