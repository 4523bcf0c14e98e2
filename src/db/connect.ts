import { Kysely, PostgresAdapter, PostgresDialect, type Dialect } from 'kysely';
import pg from 'pg';
import { createSqliteDialect } from './sqlite.ts';
import type { DB } from './database.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface ConnectOptions {
  /** Postgres only: the schema to work in (tests get a fresh one per run). */
  schema?: string;
  poolSize?: number;
}

const INT8_OID = 20;

export function connectDatabase(url: string, options: ConnectOptions = {}): Kysely<DB> {
  return new Kysely<DB>({ dialect: createDialect(url, options) });
}

function createDialect(url: string, options: ConnectOptions): Dialect {
  if (url.startsWith('sqlite:')) return createSqliteDialect(url.slice('sqlite:'.length));
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
  return new PostgresDialect({ pool });
}

/** The one place that asks which engine is underneath, for the few queries that must differ. */
export function dialectOf(db: Kysely<DB>): DialectName {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
