import { DatabaseSync, type StatementSync, type SQLInputValue } from 'node:sqlite';
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { SqliteDialect, type DatabaseConnection, type Driver, type SqliteDatabase, type SqliteStatement } from 'kysely';

const STATEMENT_CACHE_SIZE = 500;
const CHECKPOINT_INTERVAL_MS = 200;
/**
 * The log's size past which the checkpoint thread starts. Until then a checkpoint has little to copy, and the
 * thread (a V8 isolate of its own, about 15 MB resident) would sit idle in a process that writes little, such as
 * one just started (issue 42). A log this size costs readers nothing worth counting.
 */
const CHECKPOINTER_START_BYTES = 4 * 1024 * 1024;
/** The write-ahead log's size limit: past it, writers wait for a checkpoint to catch up (see SqliteConnection.logRoom). */
export const LOG_LIMIT_BYTES = 64 * 1024 * 1024;
/** Statements that only read: every other statement outside a transaction (a write, or the `begin` of one) first checks the log's room. */
const READ_ONLY = /^\s*(?:select|explain)\b/i;

export interface SqliteOptions {
  /** The write-ahead log's size limit (default LOG_LIMIT_BYTES; tests make it small). */
  logLimitBytes?: number;
}

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
   * promise that writers await before they write. The driver awaits it before
   * every statement that may write outside a transaction, `begin` included,
   * so no write path escapes it (issue 38: writes outside group commit, such as
   * rate-limit counters, grew the log without bound); group commit awaits it
   * too before taking the connection, so reads go on while its batch waits. The log is written from its start again only once a
   * checkpoint has copied all of it with no commit in between, which under
   * writes that never pause does not happen: it would grow without bound, and
   * a commit that extends the file costs about twice one that reuses it. So
   * writers wait (the event loop does not) while the checkpoint thread catches
   * up; the next write then starts the log from its beginning, and the file
   * keeps its size.
   */
  logRoom(): Promise<void> | undefined;
}

export function createSqliteDialect(path: string, options: SqliteOptions = {}): SqliteConnection {
  const logLimitBytes = options.logLimitBytes ?? LOG_LIMIT_BYTES;
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
  database.exec(`PRAGMA journal_size_limit = ${logLimitBytes}`);
  // Group commit runs each caller in a savepoint, whose sub-journal would otherwise be a temporary file written
  // page by page (a third of an emit's cost). Temporary data here is small: lists are bounded, journals are a few pages.
  database.exec('PRAGMA temp_store = MEMORY');
  // Checkpoints fsync; left to a commit they would stall the event loop for tens of milliseconds.
  database.exec('PRAGMA wal_autocheckpoint = 0');
  // Started once the log passes CHECKPOINTER_START_BYTES (or half its limit, if smaller); never started, closing the
  // database leaves the checkpoint to SQLite, which makes one as its last connection closes.
  const startBytes = Math.min(CHECKPOINTER_START_BYTES, logLimitBytes / 2);
  let checkpointer: Worker | null = null;
  let exited = false;
  let checkpointerGone!: () => void;
  const checkpointerExited = new Promise<void>((resolve) => {
    checkpointerGone = () => {
      exited = true;
      resolve();
    };
  });
  const startCheckpointer = () => {
    const thread = new Worker(new URL('./sqlite-checkpoint.worker.js', import.meta.url), {
      workerData: { path, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    thread.unref();
    thread.once('exit', checkpointerGone);
    return thread;
  };
  let stopping = false;
  const stopCheckpointer = () => {
    stopping = true;
    if (checkpointer === null) return checkpointerGone();
    // Unreferenced while it runs so it never keeps a process alive; referenced while it stops, or a process with
    // nothing else to do would exit in the middle of `db.destroy()`.
    checkpointer.ref();
    checkpointer.postMessage('stop');
  };
  let catchingUp: Promise<void> | undefined;
  const logPath = `${path}-wal`;
  const logRoom = () => {
    if (catchingUp !== undefined || exited) return catchingUp;
    // A missing log (before the first write) is within its limit.
    const logBytes = statSync(logPath, { throwIfNoEntry: false })?.size ?? 0;
    if (checkpointer === null) {
      if (logBytes <= startBytes || stopping) return undefined;
      checkpointer = startCheckpointer();
    }
    if (logBytes <= logLimitBytes) return undefined;
    const thread = checkpointer;
    catchingUp = new Promise<void>((resolve) => {
      const done = () => {
        thread.off('message', answered);
        thread.off('exit', done);
        if (!stopping) thread.unref();
        catchingUp = undefined;
        resolve();
      };
      const answered = (message: unknown) => message === 'caught-up' && done();
      // Referenced while writers wait for its answer, or a process with nothing else to do would exit before they write.
      thread.ref();
      thread.on('message', answered);
      thread.once('exit', done);
      thread.postMessage('catch-up');
    });
    return catchingUp;
  };
  return {
    dialect: new CheckpointedSqliteDialect({ database: adaptDatabase(database, stopCheckpointer) }, checkpointerExited, writeGate(database, logRoom)),
    dataVersion: dataVersionOf(database),
    logRoom,
  };
}

function dataVersionOf(database: DatabaseSync): () => number {
  const statement = database.prepare('pragma data_version');
  return () => (statement.get() as { data_version: number }).data_version;
}

/**
 * What the driver runs before a statement: waits for the log's room when the
 * statement may write and no transaction is open (inside one, its `begin`
 * waited already, and the log cannot start again under an open transaction
 * anyway). A stat of the `-wal` file per such statement: microseconds.
 * Kysely holds its one connection meanwhile, so nothing else slips in between.
 */
function writeGate(database: DatabaseSync, logRoom: () => Promise<void> | undefined): (sql: string) => Promise<void> | undefined {
  return (sql) => (database.isTransaction || READ_ONLY.test(sql) ? undefined : logRoom());
}

/**
 * `db.destroy()` resolves only once the checkpoint thread has closed its own
 * connection: until then it may still open the file and create `-wal`/`-shm`
 * beside it, racing whoever removes the database next. Every statement passes
 * the write gate first.
 */
class CheckpointedSqliteDialect extends SqliteDialect {
  readonly #checkpointerExited: Promise<void>;
  readonly #gate: (sql: string) => Promise<void> | undefined;

  constructor(config: ConstructorParameters<typeof SqliteDialect>[0], checkpointerExited: Promise<void>, gate: (sql: string) => Promise<void> | undefined) {
    super(config);
    this.#checkpointerExited = checkpointerExited;
    this.#gate = gate;
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const destroy = driver.destroy.bind(driver);
    driver.destroy = async () => {
      await destroy();
      await this.#checkpointerExited;
    };
    const gate = this.#gate;
    const acquire = driver.acquireConnection.bind(driver);
    const gated = new WeakSet<DatabaseConnection>();
    driver.acquireConnection = async () => {
      const connection = await acquire();
      // The SQLite driver hands out one connection object for its whole life: wrapped once.
      if (!gated.has(connection)) {
        gated.add(connection);
        const execute = connection.executeQuery.bind(connection);
        connection.executeQuery = async (query) => {
          const wait = gate(query.sql);
          if (wait !== undefined) await wait;
          return execute(query);
        };
      }
      return connection;
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
