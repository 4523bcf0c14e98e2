import type { Kysely } from 'kysely';
import type { Tx } from './tx.ts';
import { usesGroupCommit } from './connect.ts';
import type { DB } from './database.ts';
import { groupCommit } from './sqlite-group-commit.ts';

export type { Tx } from './tx.ts';

/**
 * Runs `work` in one transaction; after-commit callbacks run only if it commits.
 * On SQLite, callers waiting for the one writer share a commit (see groupCommit).
 * @throws whatever `work` throws, after rolling back.
 */
export async function inTransaction<T>(db: Kysely<DB>, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (usesGroupCommit(db)) return groupCommit(db, work);
  const callbacks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => work({ db: trx, afterCommit: (callback) => callbacks.push(callback) }));
  for (const callback of callbacks) callback();
  return result;
}
