import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { EmailTokenPurpose } from './accounts.tables.ts';

export async function insertEmailToken(
  db: Kysely<DB>,
  row: { tokenHash: string; accountId: string; purpose: EmailTokenPurpose; expiresAt: number; now: number },
): Promise<void> {
  await db
    .insertInto('email_tokens')
    .values({ token_hash: row.tokenHash, account_id: row.accountId, purpose: row.purpose, expires_at: row.expiresAt, used_at: null, created_at: row.now })
    .execute();
}

/** Whether the token exists, unused and unexpired: a read, so a bad link is refused before any costly work. */
export async function isEmailTokenUsable(db: Kysely<DB>, tokenHash: string, purpose: EmailTokenPurpose, now: number): Promise<boolean> {
  const row = await db
    .selectFrom('email_tokens')
    .select('account_id')
    .where('token_hash', '=', tokenHash)
    .where('purpose', '=', purpose)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Marks the token used and returns its account, in one statement: of two
 * concurrent uses exactly one gets the account back.
 */
export async function consumeEmailToken(db: Kysely<DB>, tokenHash: string, purpose: EmailTokenPurpose, now: number): Promise<string | undefined> {
  const row = await db
    .updateTable('email_tokens')
    .set({ used_at: now })
    .where('token_hash', '=', tokenHash)
    .where('purpose', '=', purpose)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .returning('account_id')
    .executeTakeFirst();
  return row?.account_id;
}

/** Retires every unused token of one purpose, so an older emailed link cannot be used after a newer action. */
export async function retireEmailTokens(db: Kysely<DB>, accountId: string, purpose: EmailTokenPurpose, now: number): Promise<void> {
  await db
    .updateTable('email_tokens')
    .set({ used_at: now })
    .where('account_id', '=', accountId)
    .where('purpose', '=', purpose)
    .where('used_at', 'is', null)
    .execute();
}

/** Used or expired links, a batch for retention: their hashes after `after`, in order. */
export async function spentEmailTokenHashes(db: Kysely<DB>, now: number, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('email_tokens').select('token_hash').where((eb) => eb.or([eb('expires_at', '<', now), eb('used_at', 'is not', null)]));
  if (after !== undefined) query = query.where('token_hash', '>', after);
  return (await query.orderBy('token_hash').limit(limit).execute()).map((row) => row.token_hash);
}

export async function deleteSpentEmailTokens(db: Kysely<DB>, now: number, hashes: readonly string[]): Promise<number> {
  if (hashes.length === 0) return 0;
  const result = await db
    .deleteFrom('email_tokens')
    .where('token_hash', 'in', hashes)
    .where((eb) => eb.or([eb('expires_at', '<', now), eb('used_at', 'is not', null)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
