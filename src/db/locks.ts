import { sql, type Transaction } from 'kysely';
import { dialectOf } from './connect.ts';
import type { DB } from './database.ts';

/**
 * Serialises writers of one account's rows (the endpoint limit, say) until the
 * transaction ends. SQLite needs nothing: its write transactions already run one at a time.
 */
export async function lockAccount(trx: Transaction<DB>, accountId: string): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`select id from accounts where id = ${accountId} for update`.execute(trx);
}
