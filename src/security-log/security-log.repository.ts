import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { SecurityLogTable } from './security-log.tables.ts';

export async function listSecurityLogRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined): Promise<SecurityLogTable[]> {
  let query = db.selectFrom('security_log').selectAll().where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/** Entries made before `bound` (an id made at the cutoff), a batch for retention: their ids after `after`, in order. */
export async function expiredSecurityLogIds(db: Kysely<DB>, bound: string, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('security_log').select('id').where('id', '<', bound);
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

export async function deleteSecurityLogEntries(db: Kysely<DB>, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.deleteFrom('security_log').where('id', 'in', ids).executeTakeFirst();
  return Number(result.numDeletedRows);
}
