import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../connect.ts';
import type { DB } from '../database.ts';

/**
 * The billing statement (issue 38): usage summed per machine and UTC day, one
 * row each, added to by every usage charge in the charge's own transaction,
 * so a statement line is one row however many charges made it (one a minute
 * per running machine). A charge counts on the day its period ends, as
 * /api/billing/usage counts it. The ledger stays as it is, append-only; the
 * rows are filled in from the usage it holds already. Credits (welcome
 * credit, top-ups) are listed from the ledger through an index of their own,
 * so the statement never walks an account's usage entries to find them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('billing_usage_days')
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('day', 'text', (col) => col.notNull())
    .addColumn('machine_id', 'text', (col) => col.notNull())
    .addColumn('amount_micros', 'bigint', (col) => col.notNull())
    .addColumn('ms', 'bigint', (col) => col.notNull())
    // Newest day first, an account's lines are one walk of the key.
    .addPrimaryKeyConstraint('billing_usage_days_pk', ['account_id', 'day', 'machine_id'])
    .execute();

  const dayOf = dialectOf(db as unknown as Kysely<DB>) === 'postgres'
    ? sql`to_char(to_timestamp(period_end / 1000.0) at time zone 'UTC', 'YYYY-MM-DD')`
    : sql`strftime('%Y-%m-%d', period_end / 1000, 'unixepoch')`;
  await sql`
    insert into billing_usage_days (account_id, "day", machine_id, amount_micros, ms)
    select account_id, ${dayOf}, machine_id, sum(amount_micros), sum(period_end - period_start)
    from billing_ledger
    where kind = 'usage' and machine_id is not null and period_start is not null and period_end is not null
    group by account_id, ${dayOf}, machine_id
  `.execute(db);

  await db.schema
    .createIndex('billing_ledger_credits')
    .on('billing_ledger')
    .columns(['account_id', 'id'])
    .where(sql.ref('kind'), '<>', sql.lit('usage'))
    .execute();
}
