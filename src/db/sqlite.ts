import { DatabaseSync, type StatementSync, type SQLInputValue } from 'node:sqlite';
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { SqliteDialect, type Driver, type SqliteDatabase, type SqliteStatement } from 'kysely';

const STATEMENT_CACHE_SIZE = 500;
const CHECKPOINT_INTERVAL_MS = 200;
/** The write-ahead log's size limit: past it, writers wait for a checkpoint to catch up (see SqliteConnection.logRoom). */
const LOG_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Kysely's own SqliteDialect over `node:sqlite`. Kysely expects the
 * better-sqlite3 shape; this bridges the two, caches prepared statements
 * (the same SQL text is prepared once), and opens write transactions with
 * `begin immediate` so that two processes on one file queue on the busy
 * timeout instead of failing a read-to-write lock upgrade.
 */
export interface SqliteConnection {
  dialect: SqliteDialect;
  /**
   * `pragma data_version`, read synchronously on the connection: it changes
   * whenever another connection (another process on the file) commits.
   * Synchronous because node:sqlite is, so a hot path need not queue behind
   * Kysely's connection lock for one cheap statement.
   */
  dataVersion(): number;
  /**
   * Undefined while the write-ahead log is within its limit; past it, a
   * promise that group commit (the one writer) awaits before its next
   * transaction. The log is written from its start again only once a
   * checkpoint has copied all of it with no commit in between, which under
   * writes that never pause does not happen: it would grow without bound, and
   * a commit that extends the file costs about twice one that reuses it. So
   * writers wait (the event loop does not) while the checkpoint thread catches
   * up; the next write then starts the log from its beginning, and the file
   * keeps its size.
   */
  logRoom(): Promise<void> | undefined;
}

export function createSqliteDialect(path: string): SqliteConnection {
  if (path === ':memory:') {
    const database = new DatabaseSync(path);
    database.exec('PRAGMA foreign_keys = ON');
    return { dialect: new SqliteDialect({ database: adaptDatabase(database, () => {}) }), dataVersion: dataVersionOf(database), logRoom: () => undefined };
  }
  mkdirSync(dirname(path), { recursive: true });
  const database = new DatabaseSync(path, { timeout: 5000 });
  database.exec('PRAGMA foreign_keys = ON');
  // WAL with synchronous=NORMAL: a commit is a write to the log, durable across process crashes (kill -9).
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('PRAGMA synchronous = NORMAL');
  database.exec(`PRAGMA journal_size_limit = ${LOG_LIMIT_BYTES}`);
  // Group commit runs each caller in a savepoint, whose sub-journal would otherwise be a temporary file written
  // page by page (a third of an emit's cost). Temporary data here is small: lists are bounded, journals are a few pages.
  database.exec('PRAGMA temp_store = MEMORY');
  // Checkpoints fsync; left to a commit they would stall the event loop for tens of milliseconds.
  database.exec('PRAGMA wal_autocheckpoint = 0');
  const checkpointer = new Worker(new URL('./sqlite-checkpoint.worker.js', import.meta.url), {
    workerData: { path, intervalMs: CHECKPOINT_INTERVAL_MS },
  });
  checkpointer.unref();
  let exited = false;
  const checkpointerExited = new Promise<void>((resolve) =>
    checkpointer.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  let stopping = false;
  const stopCheckpointer = () => {
    // Unreferenced while it runs so it never keeps a process alive; referenced while it stops, or a process with
    // nothing else to do would exit in the middle of `db.destroy()`.
    stopping = true;
    checkpointer.ref();
    checkpointer.postMessage('stop');
  };
  let catchingUp: Promise<void> | undefined;
  const logPath = `${path}-wal`;
  const logRoom = () => {
    if (catchingUp !== undefined || exited) return catchingUp;
    // A missing log (before the first write) is within its limit.
    if ((statSync(logPath, { throwIfNoEntry: false })?.size ?? 0) <= LOG_LIMIT_BYTES) return undefined;
    catchingUp = new Promise<void>((resolve) => {
      const done = () => {
        checkpointer.off('message', answered);
        checkpointer.off('exit', done);
        if (!stopping) checkpointer.unref();
        catchingUp = undefined;
        resolve();
      };
      const answered = (message: unknown) => message === 'caught-up' && done();
      // Referenced while writers wait for its answer, or a process with nothing else to do would exit before they write.
      checkpointer.ref();
      checkpointer.on('message', answered);
      checkpointer.once('exit', done);
      checkpointer.postMessage('catch-up');
    });
    return catchingUp;
  };
  return {
    dialect: new CheckpointedSqliteDialect({ database: adaptDatabase(database, stopCheckpointer) }, checkpointerExited),
    dataVersion: dataVersionOf(database),
    logRoom,
  };
}

function dataVersionOf(database: DatabaseSync): () => number {
  const statement = database.prepare('pragma data_version');
  return () => (statement.get() as { data_version: number }).data_version;
}

/**
 * `db.destroy()` resolves only once the checkpoint thread has closed its own
 * connection: until then it may still open the file and create `-wal`/`-shm`
 * beside it, racing whoever removes the database next.
 */
class CheckpointedSqliteDialect extends SqliteDialect {
  readonly #checkpointerExited: Promise<void>;

  constructor(config: ConstructorParameters<typeof SqliteDialect>[0], checkpointerExited: Promise<void>) {
    super(config);
    this.#checkpointerExited = checkpointerExited;
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const destroy = driver.destroy.bind(driver);
    driver.destroy = async () => {
      await destroy();
      await this.#checkpointerExited;
    };
    return driver;
  }
}

function adaptDatabase(database: DatabaseSync, onClose: () => void): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => {
      statements.clear();
      if (database.isOpen) database.close();
      onClose();
    },
    prepare(sql: string): SqliteStatement {
      const text = sql === 'begin' ? 'begin immediate' : sql;
      let statement = statements.get(text);
      if (statement === undefined) {
        statement = adaptStatement(database.prepare(text));
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value!);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

function adaptStatement(statement: StatementSync): SqliteStatement {
  const reader = statement.columns().length > 0;
  return {
    reader,
    all: (parameters) => statement.all(...(parameters as SQLInputValue[])),
    run: (parameters) => statement.run(...(parameters as SQLInputValue[])),
    iterate: (parameters) => statement.iterate(...(parameters as SQLInputValue[])),
  };
}
