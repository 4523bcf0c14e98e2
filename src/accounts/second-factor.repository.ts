import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { TotpFactorsTable } from './accounts.tables.ts';

export interface SecondFactorSummary {
  totp: boolean;
  passkeys: number;
  recoveryCodesLeft: number;
}

export async function findTotpFactor(db: Kysely<DB>, accountId: string): Promise<TotpFactorsTable | undefined> {
  return db.selectFrom('totp_factors').selectAll().where('account_id', '=', accountId).executeTakeFirst();
}

/** A new pending enrolment, replacing an unconfirmed one; a confirmed factor is left alone (answers false). */
export async function upsertPendingTotp(db: Kysely<DB>, accountId: string, secret: string, now: number): Promise<boolean> {
  const result = await db
    .insertInto('totp_factors')
    .values({ account_id: accountId, secret, confirmed_at: null, last_used_step: null, created_at: now })
    .onConflict((conflict) => conflict.column('account_id').doUpdateSet({ secret, created_at: now }).where('totp_factors.confirmed_at', 'is', null))
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/**
 * Records `step` as used, if it is later than the last one used, in one
 * statement: of two concurrent uses of one code exactly one wins.
 */
export async function useTotpStep(db: Kysely<DB>, accountId: string, step: number): Promise<boolean> {
  const result = await db
    .updateTable('totp_factors')
    .set({ last_used_step: step })
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('last_used_step', 'is', null), eb('last_used_step', '<', step)]))
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Confirms a pending enrolment with the step of its first code; false when there was none pending. */
export async function confirmTotpFactor(db: Kysely<DB>, accountId: string, step: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('totp_factors')
    .set({ confirmed_at: now, last_used_step: step })
    .where('account_id', '=', accountId)
    .where('confirmed_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function deleteTotpFactor(db: Kysely<DB>, accountId: string): Promise<boolean> {
  const result = await db.deleteFrom('totp_factors').where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Replaces every recovery code of the account (the old ones stop working). */
export async function replaceRecoveryCodes(db: Kysely<DB>, accountId: string, codeHashes: readonly string[], now: number): Promise<void> {
  await db.deleteFrom('recovery_codes').where('account_id', '=', accountId).execute();
  if (codeHashes.length === 0) return;
  await db
    .insertInto('recovery_codes')
    .values(codeHashes.map((code_hash) => ({ account_id: accountId, code_hash, used_at: null, created_at: now })))
    .execute();
}

/** Marks the code used, if it is unused, in one statement: a code works once even when sent twice at once. */
export async function useRecoveryCode(db: Kysely<DB>, accountId: string, codeHash: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('recovery_codes')
    .set({ used_at: now })
    .where('account_id', '=', accountId)
    .where('code_hash', '=', codeHash)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function countUnusedRecoveryCodes(db: Kysely<DB>, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('recovery_codes')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .where('used_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** What `GET /api/me` shows, in one read. */
export async function secondFactorSummary(db: Kysely<DB>, accountId: string): Promise<SecondFactorSummary> {
  const row = await db
    .selectNoFrom((eb) => [
      eb.selectFrom('totp_factors').select((inner) => inner.fn.countAll<number>().as('n')).where('account_id', '=', accountId).where('confirmed_at', 'is not', null).as('totp'),
      eb.selectFrom('passkeys').select((inner) => inner.fn.countAll<number>().as('n')).where('account_id', '=', accountId).as('passkeys'),
      eb.selectFrom('recovery_codes').select((inner) => inner.fn.countAll<number>().as('n')).where('account_id', '=', accountId).where('used_at', 'is', null).as('recovery'),
    ])
    .executeTakeFirstOrThrow();
  return { totp: Number(row.totp) > 0, passkeys: Number(row.passkeys), recoveryCodesLeft: Number(row.recovery) };
}

export async function insertPendingSignIn(db: Kysely<DB>, row: { tokenHash: string; accountId: string; now: number; expiresAt: number }): Promise<void> {
  await db.insertInto('pending_sign_ins').values({ token_hash: row.tokenHash, account_id: row.accountId, created_at: row.now, expires_at: row.expiresAt }).execute();
}

export async function findPendingSignIn(db: Kysely<DB>, tokenHash: string, now: number): Promise<string | undefined> {
  const row = await db.selectFrom('pending_sign_ins').select('account_id').where('token_hash', '=', tokenHash).where('expires_at', '>', now).executeTakeFirst();
  return row?.account_id;
}

/** Ends the pending sign-in; true for the one caller that ended it (two completions at once make one session). */
export async function deletePendingSignIn(db: Kysely<DB>, tokenHash: string): Promise<boolean> {
  const result = await db.deleteFrom('pending_sign_ins').where('token_hash', '=', tokenHash).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function deleteExpiredPendingSignIns(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('pending_sign_ins').where('expires_at', '<=', now).execute();
}

/** The challenge for this binding, replacing an earlier one (one ceremony at a time per session or browser). */
export async function storeChallenge(db: Kysely<DB>, binding: string, challenge: string, expiresAt: number): Promise<void> {
  await db
    .insertInto('webauthn_challenges')
    .values({ binding, challenge, expires_at: expiresAt })
    .onConflict((conflict) => conflict.column('binding').doUpdateSet({ challenge, expires_at: expiresAt }))
    .execute();
}

/** Takes the challenge, unexpired, out of storage: it works once. */
export async function takeChallenge(db: Kysely<DB>, binding: string, now: number): Promise<string | undefined> {
  const row = await db.deleteFrom('webauthn_challenges').where('binding', '=', binding).returning(['challenge', 'expires_at']).executeTakeFirst();
  return row !== undefined && row.expires_at > now ? row.challenge : undefined;
}

export async function deleteExpiredChallenges(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('webauthn_challenges').where('expires_at', '<=', now).execute();
}

/** Marks the session as authenticated now (a reauthentication). */
export async function markSessionAuthenticated(db: Kysely<DB>, sessionId: string, now: number): Promise<void> {
  await db.updateTable('sessions').set({ authenticated_at: now }).where('id', '=', sessionId).execute();
}
