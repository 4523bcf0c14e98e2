import { Kysely, PostgresAdapter, PostgresDialect, type DatabaseIntrospector, type Dialect } from 'kysely';
import pg from 'pg';
import { sendStatements } from './pg-statements.ts';
import { CurrentSchemaIntrospector } from './postgres-introspector.ts';
import { createSqliteDialect } from './sqlite.ts';
import type { DB } from './database.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface ConnectOptions {
  /** Postgres only: the schema to work in (tests get a fresh one per run). */
  schema?: string;
  poolSize?: number;
  /** PostgreSQL: PG_PREPARED_STATEMENTS (see pg-statements.ts). */
  preparedStatements?: boolean;
}

const INT8_OID = 20;

const sqliteDataVersions = new WeakMap<Kysely<DB>, () => number>();
const sqliteLogRooms = new WeakMap<Kysely<DB>, () => Promise<void> | undefined>();

export function connectDatabase(url: string, options: ConnectOptions = {}): Kysely<DB> {
  if (url.startsWith('sqlite:')) {
    const sqlite = createSqliteDialect(url.slice('sqlite:'.length));
    const db = new Kysely<DB>({ dialect: sqlite.dialect });
    sqliteDataVersions.set(db, sqlite.dataVersion);
    sqliteLogRooms.set(db, sqlite.logRoom);
    return db;
  }
  return new Kysely<DB>({ dialect: createPostgresDialect(url, options) });
}

/** Whether this is a SQLite database this module connected: its transactions share commits (see sqlite-group-commit.ts). */
export function usesGroupCommit(db: Kysely<DB>): boolean {
  return sqliteDataVersions.has(db);
}

/** SQLite's `data_version` reader for a database this module connected (see SqliteConnection); undefined on PostgreSQL. */
export function sqliteDataVersionOf(db: Kysely<DB>): (() => number) | undefined {
  return sqliteDataVersions.get(db);
}

/** On SQLite, what a writer awaits first while the write-ahead log is past its limit (see SqliteConnection.logRoom). */
export function sqliteLogRoom(db: Kysely<DB>): Promise<void> | undefined {
  return sqliteLogRooms.get(db)?.();
}

function createPostgresDialect(url: string, options: ConnectOptions): Dialect {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    // Timestamps are stored as epoch milliseconds in bigint columns; they fit a JS number.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  if (options.preparedStatements ?? true) pool.on('connect', (client) => sendStatements(client));
  return new CurrentSchemaPostgresDialect({ pool });
}

/** Kysely's PostgreSQL dialect, introspecting only our own schema (see CurrentSchemaIntrospector). */
class CurrentSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

/** The one place that asks which engine is underneath, for the few queries that must differ. */
export function dialectOf(db: Kysely<DB>): DialectName {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
