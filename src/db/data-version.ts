import type { Database } from './connect.ts';

/**
 * What a cache compares to know whether another process has committed since
 * it read something: SQLite's `data_version` on a shared file; always 0 where
 * other processes announce their changes (PostgreSQL's NOTIFY) or cannot
 * exist. Read once per turn of the event loop, however many requests ask:
 * every request handled in a turn arrived before the turn began, so a version
 * read during the turn is at least as new as any of them needs.
 */
export function otherProcessesCommits(database: Database): () => number {
  if (database.engine !== 'sqlite' || !database.sharedFile) return () => 0;
  const read = database.dataVersion;
  let thisTurn: number | undefined;
  return () => {
    if (thisTurn === undefined) {
      thisTurn = read();
      setImmediate(() => (thisTurn = undefined));
    }
    return thisTurn;
  };
}

/**
 * On a shared SQLite file, calls `onChange` within `intervalMs` of another
 * process's commit: SQLite's stand-in for PostgreSQL's NOTIFY, for whoever
 * can do with "something changed" (see the `elsewhere` signal). Returns the stop.
 */
export function watchOtherProcessesCommits(database: Database, intervalMs: number, onChange: () => void): () => void {
  if (database.engine !== 'sqlite' || !database.sharedFile) return () => {};
  const read = database.dataVersion;
  let last = read();
  const timer = setInterval(() => {
    const version = read();
    if (version !== last) onChange();
    last = version;
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
