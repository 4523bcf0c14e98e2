import type { Kysely, Transaction } from 'kysely';
import type { DB } from './database.ts';

/** A transaction plus work to do only once it has committed (waking the delivery worker, say). */
export interface Tx {
  db: Transaction<DB>;
  afterCommit(callback: () => void): void;
}

/**
 * Runs `work` in one transaction; after-commit callbacks run only if it commits.
 * @throws whatever `work` throws, after rolling back.
 */
export async function inTransaction<T>(db: Kysely<DB>, work: (tx: Tx) => Promise<T>): Promise<T> {
  const callbacks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => work({ db: trx, afterCommit: (callback) => callbacks.push(callback) }));
  for (const callback of callbacks) callback();
  return result;
}
