import type { Kysely, Transaction } from 'kysely';
import { dialectOf } from './connect.ts';
import type { DB } from './database.ts';
import { groupCommit } from './sqlite-group-commit.ts';

/** A transaction plus work to do only once it has committed (waking the delivery worker, say). */
export interface Tx {
  db: Transaction<DB>;
  afterCommit(callback: () => void): void;
}

/**
 * Runs `work` in one transaction; after-commit callbacks run only if it commits.
 * On SQLite, callers waiting for the one writer share a commit (see groupCommit).
 * @throws whatever `work` throws, after rolling back.
 */
export async function inTransaction<T>(db: Kysely<DB>, work: (tx: Tx) => Promise<T>): Promise<T> {
  if (dialectOf(db) === 'sqlite') return groupCommit(db, work);
  const callbacks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => work({ db: trx, afterCommit: (callback) => callbacks.push(callback) }));
  for (const callback of callbacks) callback();
  return result;
}
