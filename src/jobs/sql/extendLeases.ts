import type { Kysely } from 'kysely';
import { isOneOf } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';

/** Renews `runner`'s leases on its jobs of a kind (or on these ids only); answers how many it still held. */
export async function extendLeases(db: Kysely<DB>, runner: string, kind: string, leaseUntil: number, ids?: readonly string[]): Promise<number> {
  let query = db.updateTable('jobs').set({ locked_until: leaseUntil }).where('locked_by', '=', runner).where('kind', '=', kind);
  if (ids !== undefined) query = query.where(isOneOf(db, 'id', ids));
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}
