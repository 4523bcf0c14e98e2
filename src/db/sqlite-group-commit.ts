import { CompiledQuery, type ControlledTransaction, type Kysely } from 'kysely';
import type { DB } from './database.ts';
import type { Tx } from './tx.ts';

/** Callers in one commit at most: bounds how long the first of them waits for its answer. */
const MAX_BATCH = 64;
const SAVEPOINT = CompiledQuery.raw('savepoint caller');
const RELEASE = CompiledQuery.raw('release caller');
const ROLLBACK_TO = CompiledQuery.raw('rollback to caller');

interface Caller {
  work: (tx: Tx) => Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

interface Done {
  caller: Caller;
  result: unknown;
  callbacks: Array<() => void>;
}

export type GroupCommit = <T>(work: (tx: Tx) => Promise<T>) => Promise<T>;

/**
 * Group commit for SQLite. Its write transactions run one at a time on one
 * connection, and a commit costs far more than a small transaction's
 * statements (every page it touched is written to the log). Callers that
 * queue up while a transaction runs therefore share the next one: each in its
 * own savepoint, so a caller that fails is rolled back alone, and each
 * answered only once the shared commit is done. The effect is that of running
 * them one after another, committing each: a caller sees its predecessors'
 * writes, and if the commit itself fails, every caller in it gets the error.
 * Each batch first awaits `logRoom` before it takes the connection, so reads go
 * on while it waits (the driver gates every other write the same way: see
 * SqliteConnection.logRoom).
 */
export function createGroupCommit(db: Kysely<DB>, logRoom: () => Promise<void> | undefined): GroupCommit {
  const queue: Caller[] = [];
  /** A batch is due at the event loop's next check phase, or running. */
  let scheduled = false;

  /**
   * Each batch starts on a turn of the event loop of its own, not straight
   * after the caller or the previous batch: SQLite's statements never wait,
   * so writers queueing up back to back would otherwise run batch after batch
   * in one turn and hold off all I/O (requests, webhook answers) until they
   * stop. Waiting for the turn also lets more callers join the batch.
   */
  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      void commitBatch().finally(() => {
        scheduled = false;
        if (queue.length > 0) schedule();
      });
    });
  }

  async function commitBatch(): Promise<void> {
    let trx: ControlledTransaction<DB>;
    try {
      await logRoom();
      trx = await db.startTransaction().execute();
    } catch (error) {
      // Could not even begin (the file is locked beyond the busy timeout, say): everyone waiting would meet the same.
      for (const caller of queue.splice(0)) caller.reject(error);
      return;
    }
    const done: Done[] = [];
    let current: Caller | undefined;
    try {
      while (queue.length > 0 && done.length < MAX_BATCH) {
        current = queue.shift()!;
        const callbacks: Array<() => void> = [];
        await trx.executeQuery(SAVEPOINT);
        let result: unknown;
        try {
          result = await current.work({ db: trx, afterCommit: (callback) => callbacks.push(callback) });
        } catch (error) {
          // Its own error, even if undoing it fails below (then SQLite has already undone it with everything else).
          current.reject(error);
          current = undefined;
          await trx.executeQuery(ROLLBACK_TO);
          await trx.executeQuery(RELEASE);
          continue;
        }
        await trx.executeQuery(RELEASE);
        done.push({ caller: current, result, callbacks });
        current = undefined;
      }
      await trx.commit().execute();
    } catch (error) {
      // The transaction itself failed (an I/O error, or SQLite rolled it back): nothing in it was committed.
      await trx.rollback().execute().catch(() => {});
      current?.reject(error);
      for (const { caller } of done) caller.reject(error);
      return;
    }
    for (const { caller, result, callbacks } of done) {
      try {
        for (const callback of callbacks) callback();
        caller.resolve(result);
      } catch (error) {
        caller.reject(error);
      }
    }
  }

  return <T>(work: (tx: Tx) => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      schedule();
    });
}
