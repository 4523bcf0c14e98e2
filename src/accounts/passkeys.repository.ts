import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { PasskeysTable } from './accounts.tables.ts';

export async function insertPasskey(db: Kysely<DB>, row: PasskeysTable): Promise<void> {
  await db.insertInto('passkeys').values(row).execute();
}

export async function listPasskeyRows(db: Kysely<DB>, accountId: string): Promise<PasskeysTable[]> {
  return db.selectFrom('passkeys').selectAll().where('account_id', '=', accountId).orderBy('id', 'desc').execute();
}

export async function findPasskeyByCredentialId(db: Kysely<DB>, credentialId: string): Promise<PasskeysTable | undefined> {
  return db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId).executeTakeFirst();
}

export async function findPasskey(db: Kysely<DB>, accountId: string, id: string): Promise<PasskeysTable | undefined> {
  return db.selectFrom('passkeys').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function renamePasskey(db: Kysely<DB>, accountId: string, id: string, name: string): Promise<boolean> {
  const result = await db.updateTable('passkeys').set({ name }).where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function deletePasskey(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('passkeys').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Records a use: the authenticator's new signature counter and the time.
 * The counter only moves forward (a counter that does not grow, other than 0, means a cloned authenticator and is refused before this).
 */
export async function recordPasskeyUse(db: Kysely<DB>, id: string, counter: number, now: number): Promise<void> {
  await db.updateTable('passkeys').set({ counter, last_used_at: now }).where('id', '=', id).execute();
}
