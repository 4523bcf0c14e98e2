import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';

/**
 * The key named `name`, made by whichever process asks first: an insert that
 * leaves an existing key alone, then a read, so every process on the database
 * ends up with the same key and can check what another signed.
 */
export async function signingKey(db: Kysely<DB>, name: string, now: number): Promise<Buffer> {
  await db
    .insertInto('signing_keys')
    .values({ name, secret: randomBytes(32).toString('base64url'), created_at: now })
    .onConflict((conflict) => conflict.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('signing_keys').select('secret').where('name', '=', name).executeTakeFirstOrThrow();
  return Buffer.from(row.secret, 'base64url');
}

/** Records a challenge as used; true for the one caller that recorded it (two identical answers at once: one wins). */
export async function spendChallenge(db: Kysely<DB>, challengeHash: string, expiresAt: number): Promise<boolean> {
  const result = await db
    .insertInto('spent_challenges')
    .values({ challenge_hash: challengeHash, expires_at: expiresAt })
    .onConflict((conflict) => conflict.column('challenge_hash').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/** Spent challenges whose cookie has expired: such a cookie is refused anyway. */
export async function deleteExpiredSpentChallenges(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('spent_challenges').where('expires_at', '<=', now).execute();
}
