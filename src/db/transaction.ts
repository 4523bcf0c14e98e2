import type { Tx } from './tx.ts';
import type { Database } from './connect.ts';

export type { Tx } from './tx.ts';

/**
 * Runs `work` in one transaction; after-commit callbacks run only if it commits.
 * On SQLite, callers waiting for the one writer share a commit (see createGroupCommit).
 * @throws whatever `work` throws, after rolling back.
 */
export async function inTransaction<T>(database: Database, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (database.engine === 'sqlite') return database.groupCommit(work);
  const callbacks: Array<() => void> = [];
  const result = await database.db.transaction().execute((trx) => work({ db: trx, afterCommit: (callback) => callbacks.push(callback) }));
  for (const callback of callbacks) callback();
  return result;
}
