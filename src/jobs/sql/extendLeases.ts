import type { Kysely } from 'kysely';
import { isOneOf } from '../../db/batch.ts';
import type { DB } from '../../db/database.ts';

/** Renews `runner`'s leases on its jobs of a kind (or on these ids only); answers the ids it still held. */
export async function extendLeases(db: Kysely<DB>, runner: string, kind: string, leaseUntil: number, ids?: readonly string[]): Promise<string[]> {
  let query = db.updateTable('jobs').set({ locked_until: leaseUntil }).where('locked_by', '=', runner).where('kind', '=', kind);
  if (ids !== undefined) query = query.where(isOneOf(db, 'id', ids));
  return (await query.returning('id').execute()).map((row) => row.id);
}
