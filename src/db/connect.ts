import { createRequire } from 'node:module';
import { Kysely, PostgresAdapter, PostgresDialect, type DatabaseIntrospector, type Dialect } from 'kysely';
import type pg from 'pg';
import { sendStatements } from './pg-statements.ts';
import { CurrentSchemaIntrospector } from './postgres-introspector.ts';
import { createGroupCommit, type GroupCommit } from './sqlite-group-commit.ts';
import { createSqliteDialect } from './sqlite.ts';
import type { DB } from './database.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface ConnectOptions {
  /** Postgres only: the schema to work in (tests get a fresh one per run). */
  schema?: string;
  poolSize?: number;
  /** PostgreSQL: PG_PREPARED_STATEMENTS (see pg-statements.ts). */
  preparedStatements?: boolean;
  /** SQLite only: the write-ahead log's size limit (tests make it small; see sqlite.ts). */
  sqliteLogLimitBytes?: number;
}

const INT8_OID = 20;

/** pg, loaded only where the database is PostgreSQL (issue 42: a SQLite service never needs it); CommonJS, so synchronously. */
const loadPg = () => createRequire(import.meta.url)('pg') as typeof pg;

/**
 * What connectDatabase opened: the Kysely instance, and what the engine under it is. On SQLite, that is also
 * its one writer, which every transaction goes through (see inTransaction), and `data_version`, by which it
 * notices other processes' commits on the file (see data-version.ts).
 */
export type Database = { readonly db: Kysely<DB>; destroy(): Promise<void> } & (
  | { readonly engine: 'postgres' }
  | {
      readonly engine: 'sqlite';
      readonly groupCommit: GroupCommit;
      readonly dataVersion: () => number;
      /** A file other processes may open too (not `sqlite::memory:`): their commits are behind this one's back. */
      readonly sharedFile: boolean;
    }
);

export function connectDatabase(url: string, options: ConnectOptions = {}): Database {
  if (url.startsWith('sqlite:')) {
    const sqlite = createSqliteDialect(url.slice('sqlite:'.length), options.sqliteLogLimitBytes === undefined ? {} : { logLimitBytes: options.sqliteLogLimitBytes });
    const db = new Kysely<DB>({ dialect: sqlite.dialect });
    const sharedFile = url !== 'sqlite::memory:';
    return { engine: 'sqlite', db, groupCommit: createGroupCommit(db, sqlite.logRoom), dataVersion: sqlite.dataVersion, sharedFile, destroy: () => db.destroy() };
  }
  const db = new Kysely<DB>({ dialect: createPostgresDialect(url, options) });
  return { engine: 'postgres', db, destroy: () => db.destroy() };
}

function createPostgresDialect(url: string, options: ConnectOptions): Dialect {
  const pg = loadPg();
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
