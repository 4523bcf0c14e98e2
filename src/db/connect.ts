import { Kysely, PostgresAdapter, PostgresDialect, type DatabaseIntrospector, type Dialect } from 'kysely';
import pg from 'pg';
import { CurrentSchemaIntrospector } from './postgres-introspector.ts';
import { preparedStatementName } from './prepared.ts';
import { createSqliteDialect } from './sqlite.ts';
import type { DB } from './database.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface ConnectOptions {
  /** Postgres only: the schema to work in (tests get a fresh one per run). */
  schema?: string;
  poolSize?: number;
}

const INT8_OID = 20;

const sqliteDataVersions = new WeakMap<Kysely<DB>, () => number>();

export function connectDatabase(url: string, options: ConnectOptions = {}): Kysely<DB> {
  if (url.startsWith('sqlite:')) {
    const sqlite = createSqliteDialect(url.slice('sqlite:'.length));
    const db = new Kysely<DB>({ dialect: sqlite.dialect });
    sqliteDataVersions.set(db, sqlite.dataVersion);
    return db;
  }
  return new Kysely<DB>({ dialect: createPostgresDialect(url, options) });
}

/** SQLite's `data_version` reader for a database this module connected (see SqliteConnection); undefined on PostgreSQL. */
export function sqliteDataVersionOf(db: Kysely<DB>): (() => number) | undefined {
  return sqliteDataVersions.get(db);
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
  pool.on('connect', nameHotStatements);
  return new CurrentSchemaPostgresDialect({ pool });
}

/** Kysely's PostgreSQL dialect, introspecting only our own schema (see CurrentSchemaIntrospector). */
class CurrentSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

/**
 * Kysely sends every query as an unnamed statement, which PostgreSQL parses
 * and plans each time; the texts marked by preferPrepared go as named ones
 * instead, prepared once per connection.
 */
function nameHotStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (config: pg.QueryConfig) => Promise<pg.QueryResult>;
  const passThrough = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, values?: unknown, ...rest: unknown[]) => {
    const name = typeof text === 'string' && Array.isArray(values) && rest.length === 0 ? preparedStatementName(text) : undefined;
    return name === undefined ? passThrough(text, values, ...rest) : query({ name, text: text as string, values: values as unknown[] });
  }) as typeof client.query;
}

/** The one place that asks which engine is underneath, for the few queries that must differ. */
export function dialectOf(db: Kysely<DB>): DialectName {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
