import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { Tx } from '../db/transaction.ts';
import type { OAuthGrantsTable, OAuthRecordsTable } from './oauth.tables.ts';

/** An authorization server record as its adapter gives it back, or undefined when absent or expired. */
export async function findRecord(db: Kysely<DB>, kind: string, idHash: string, now: number): Promise<{ payload: string; consumed_at: number | null } | undefined> {
  return db
    .selectFrom('oauth_records')
    .select(['payload', 'consumed_at'])
    .where('kind', '=', kind)
    .where('id_hash', '=', idHash)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirst();
}

export async function findRecordByUid(db: Kysely<DB>, kind: string, uid: string, now: number): Promise<{ payload: string; consumed_at: number | null } | undefined> {
  return db
    .selectFrom('oauth_records')
    .select(['payload', 'consumed_at'])
    .where('kind', '=', kind)
    .where('uid', '=', uid)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirst();
}

/** A record as the adapter writes it: consumption is marked apart. */
export type RecordRow = Omit<OAuthRecordsTable, 'consumed_at'>;

export async function upsertRecord(db: Kysely<DB>, row: RecordRow): Promise<void> {
  await db
    .insertInto('oauth_records')
    .values({ ...row, consumed_at: null })
    .onConflict((conflict) =>
      conflict.columns(['kind', 'id_hash']).doUpdateSet({ payload: row.payload, grant_id: row.grant_id, uid: row.uid, expires_at: row.expires_at }),
    )
    .execute();
}

export async function consumeRecord(db: Kysely<DB>, kind: string, idHash: string, now: number): Promise<void> {
  await db.updateTable('oauth_records').set({ consumed_at: now }).where('kind', '=', kind).where('id_hash', '=', idHash).execute();
}

export async function deleteRecord(db: Kysely<DB>, kind: string, idHash: string): Promise<void> {
  await db.deleteFrom('oauth_records').where('kind', '=', kind).where('id_hash', '=', idHash).execute();
}

export async function deleteGrantRecords(db: Kysely<DB>, kind: string, grantId: string): Promise<void> {
  await db.deleteFrom('oauth_records').where('kind', '=', kind).where('grant_id', '=', grantId).execute();
}

/** Every record of a grant (its codes and tokens, of every kind), and the grant as the dashboard lists it. */
export async function deleteGrantEverywhere(db: Kysely<DB> | Tx['db'], grantId: string): Promise<void> {
  await db.deleteFrom('oauth_records').where('grant_id', '=', grantId).execute();
  await db.deleteFrom('oauth_grants').where('id', '=', grantId).execute();
}

export async function deleteExpiredRecords(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('oauth_records').where('expires_at', '<', now).execute();
  const expired = await db.selectFrom('oauth_grants').select('id').where('expires_at', '<', now).execute();
  for (const { id } of expired) await deleteGrantEverywhere(db, id);
}

export async function insertGrant(tx: Tx['db'], row: OAuthGrantsTable): Promise<void> {
  await tx.insertInto('oauth_grants').values(row).execute();
}

export async function findGrant(db: Kysely<DB>, grantId: string): Promise<OAuthGrantsTable | undefined> {
  return db.selectFrom('oauth_grants').selectAll().where('id', '=', grantId).executeTakeFirst();
}

export async function listGrantRows(db: Kysely<DB>, accountId: string, limit: number, cursor: string | undefined): Promise<OAuthGrantsTable[]> {
  let query = db.selectFrom('oauth_grants').selectAll().where('account_id', '=', accountId);
  if (cursor !== undefined) query = query.where('id', '<', cursor);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

export async function recordGrantUse(db: Kysely<DB>, grantId: string, now: number): Promise<void> {
  await db.updateTable('oauth_grants').set({ last_used_at: now }).where('id', '=', grantId).execute();
}

/** A value every process shares (the authorization server's cookie keys): the first process to ask makes it. */
export async function sharedSecret(db: Kysely<DB>, name: string, make: () => string): Promise<string> {
  await db
    .insertInto('oauth_records')
    .values({ kind: 'Secret', id_hash: name, payload: JSON.stringify(make()), grant_id: null, uid: null, expires_at: null, consumed_at: null })
    .onConflict((conflict) => conflict.columns(['kind', 'id_hash']).doNothing())
    .execute();
  const row = await db.selectFrom('oauth_records').select('payload').where('kind', '=', 'Secret').where('id_hash', '=', name).executeTakeFirstOrThrow();
  return JSON.parse(row.payload) as string;
}
