import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { BillingIdempotencyTable } from './billing.tables.ts';

/** A key kept since `since` (older ones count as forgotten, whether or not maintenance deleted them yet). */
export async function findIdempotencyKey(db: Kysely<DB>, accountId: string, key: string, since: number): Promise<BillingIdempotencyTable | undefined> {
  return db
    .selectFrom('billing_idempotency')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .where('created_at', '>=', since)
    .executeTakeFirst();
}

/** The key, before its charge; a key past its 24 h is taken over. */
export async function reserveIdempotencyKey(db: Kysely<DB>, row: BillingIdempotencyTable): Promise<void> {
  await db
    .insertInto('billing_idempotency')
    .values(row)
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'key'])
        .doUpdateSet({ amount_micros: row.amount_micros, transaction_id: null, created_at: row.created_at })
        .where('billing_idempotency.created_at', '<', row.created_at - 24 * 3_600_000),
    )
    .execute();
}

export async function recordIdempotencyKey(db: Kysely<DB>, accountId: string, key: string, transactionId: string): Promise<void> {
  await db.updateTable('billing_idempotency').set({ transaction_id: transactionId }).where('account_id', '=', accountId).where('key', '=', key).execute();
}

/** A declined charge: the key is free again, as if never sent. */
export async function forgetIdempotencyKey(db: Kysely<DB>, accountId: string, key: string): Promise<void> {
  await db.deleteFrom('billing_idempotency').where('account_id', '=', accountId).where('key', '=', key).where('transaction_id', 'is', null).execute();
}
