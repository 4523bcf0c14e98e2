import type { Transaction } from 'kysely';
import type { DB } from './database.ts';

/** A transaction plus work to do only once it has committed (handing jobs to this process's runner, say). */
export interface Tx {
  db: Transaction<DB>;
  afterCommit(callback: () => void): void;
}
