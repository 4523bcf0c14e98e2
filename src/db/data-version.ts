import { CompiledQuery, type Kysely } from 'kysely';
import type { DB } from './database.ts';

const DATA_VERSION = CompiledQuery.raw('pragma data_version');

/** Whether other processes may write to the same database file behind this one's back. */
export function sharesSqliteFile(databaseUrl: string): boolean {
  return databaseUrl.startsWith('sqlite:') && databaseUrl !== 'sqlite::memory:';
}

/**
 * SQLite only: a number that changes whenever another connection (another
 * process on the same file) commits; this connection's own commits leave it
 * as it is. One cheap statement, no table read.
 */
export async function readSqliteDataVersion(db: Kysely<DB>): Promise<number> {
  const { rows } = await db.executeQuery<{ data_version: number }>(DATA_VERSION);
  return rows[0]!.data_version;
}

/**
 * What a cache compares, read just now, to know whether another process has
 * committed since it read something: `data_version` on a shared SQLite file;
 * always 0 where other processes announce their changes (PostgreSQL's
 * NOTIFY) or cannot exist.
 */
export function otherProcessesCommits(db: Kysely<DB>, databaseUrl: string): () => Promise<number> {
  return sharesSqliteFile(databaseUrl) ? () => readSqliteDataVersion(db) : async () => 0;
}

/**
 * On a shared SQLite file, calls `onChange` within `intervalMs` of another
 * process's commit: SQLite's stand-in for PostgreSQL's NOTIFY, for whoever
 * can do with "something changed" (see the `elsewhere` signal). Returns the stop.
 */
export function watchOtherProcessesCommits(db: Kysely<DB>, databaseUrl: string, intervalMs: number, onChange: () => void): () => void {
  if (!sharesSqliteFile(databaseUrl)) return () => {};
  let last: number | undefined;
  let stopped = false;
  const timer = setInterval(() => {
    readSqliteDataVersion(db).then(
      (version) => {
        if (!stopped && last !== undefined && version !== last) onChange();
        last = version;
      },
      () => {}, // a busy or closing database: the next tick asks again
    );
  }, intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
