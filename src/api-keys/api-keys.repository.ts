import { CompiledQuery, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { secondFactorCounts, toAccount, toSecondFactorView, type Account } from '../accounts/accounts.repository.ts';
import type { SecondFactorView } from '../http/principal.ts';
import type { ApiKeysTable } from './api-keys.tables.ts';

export interface StoredApiKey {
  id: string;
  accountId: string;
  lastUsedAt: number | null;
  /** The owner's public fields, read with the key. */
  account: Account;
  /** The owner's second factors as `GET /api/me` shows them; a factor change signals `account:<id>`, which drops this copy. */
  secondFactor: SecondFactorView;
}

export async function insertApiKey(db: Kysely<DB>, row: ApiKeysTable): Promise<void> {
  await db.insertInto('api_keys').values(row).execute();
}

/** The key and its owner's public fields, in one read. */
export async function findApiKeyByTokenHash(db: Kysely<DB>, tokenHash: string): Promise<StoredApiKey | undefined> {
  const row = await db
    .selectFrom('api_keys as k')
    .innerJoin('accounts as a', 'a.id', 'k.account_id')
    .select(['k.id as key_id', 'k.last_used_at', 'a.id', 'a.email', 'a.name', 'a.email_verified_at', 'a.created_at'])
    .select(secondFactorCounts('a.id'))
    .where('k.token_hash', '=', tokenHash)
    .executeTakeFirst();
  return row && { id: row.key_id, accountId: row.id, lastUsedAt: row.last_used_at, account: toAccount(row), secondFactor: toSecondFactorView(row) };
}

export async function listApiKeyRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined) {
  let query = db
    .selectFrom('api_keys')
    .select(['id', 'name', 'prefix', 'created_at', 'last_used_at'])
    .where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/** Deletes the key; answers its name, or undefined when there was no such key. The caller announces the revocation. */
export async function deleteApiKey(db: Kysely<DB>, accountId: string, id: string): Promise<string | undefined> {
  const row = await db.deleteFrom('api_keys').where('id', '=', id).where('account_id', '=', accountId).returning('name').executeTakeFirst();
  return row?.name;
}

/**
 * Sets last_used_at to `now` unless it was set within `resolutionMs`, decided
 * by the database: each process remembers only its own writes, so the
 * condition is what keeps it to one write a minute across processes.
 * True when this call wrote.
 */
export async function recordApiKeyUse(db: Kysely<DB>, id: string, now: number, resolutionMs: number): Promise<boolean> {
  const result = await db
    .updateTable('api_keys')
    .set({ last_used_at: now })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', now - resolutionMs)]))
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
