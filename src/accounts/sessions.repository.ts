import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { SessionsTable } from './accounts.tables.ts';

export async function insertSession(db: Kysely<DB>, row: SessionsTable): Promise<void> {
  await db.insertInto('sessions').values(row).execute();
}

export async function findSessionByTokenHash(db: Kysely<DB>, tokenHash: string): Promise<SessionsTable | undefined> {
  return db.selectFrom('sessions').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

export async function touchSession(db: Kysely<DB>, id: string, now: number): Promise<void> {
  await db.updateTable('sessions').set({ last_seen_at: now }).where('id', '=', id).execute();
}

export async function listSessionRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined): Promise<SessionsTable[]> {
  let query = db.selectFrom('sessions').selectAll().where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

export async function deleteSession(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('sessions').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Answers the account whose session it was, if there was one. */
export async function deleteSessionByTokenHash(db: Kysely<DB>, tokenHash: string): Promise<string | undefined> {
  const row = await db.deleteFrom('sessions').where('token_hash', '=', tokenHash).returning('account_id').executeTakeFirst();
  return row?.account_id;
}

/** Signs out every session of the account, except `keepId` when given. */
export async function deleteSessionsOfAccount(db: Kysely<DB>, accountId: string, keepId?: string): Promise<void> {
  let query = db.deleteFrom('sessions').where('account_id', '=', accountId);
  if (keepId !== undefined) query = query.where('id', '!=', keepId);
  await query.execute();
}

/** Sessions idle since before `lastSeenBefore`, a batch for retention: their ids after `after`, in order. */
export async function idleSessionIds(db: Kysely<DB>, lastSeenBefore: number, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('sessions').select('id').where('last_seen_at', '<', lastSeenBefore);
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

/** Deletes these sessions if still idle (one used meanwhile stays); answers how many. */
export async function deleteIdleSessions(db: Kysely<DB>, lastSeenBefore: number, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.deleteFrom('sessions').where('id', 'in', ids).where('last_seen_at', '<', lastSeenBefore).executeTakeFirst();
  return Number(result.numDeletedRows);
}
