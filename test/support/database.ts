import { randomBytes } from 'node:crypto';
import type { CompiledQuery, Kysely } from 'kysely';
import type { DB } from '../../src/db/database.ts';
import pg from 'pg';

/** `npm test` runs on in-memory SQLite unless DATABASE_URL names a Postgres database. */
export const TEST_DATABASE_URL = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : 'sqlite::memory:';

export const onPostgres = TEST_DATABASE_URL.startsWith('postgres');

export interface TestDatabase {
  url: string;
  schema: string | undefined;
  drop(): Promise<void>;
}

/** A fresh, empty database: a new Postgres schema, or a new in-memory SQLite (or a given file). */
export async function freshDatabase(sqlitePath = ':memory:'): Promise<TestDatabase> {
  if (!onPostgres) return { url: `sqlite:${sqlitePath}`, schema: undefined, drop: async () => {} };
  const schema = `test_${randomBytes(6).toString('hex')}`;
  await adminQuery(`create schema ${schema}`);
  return { url: TEST_DATABASE_URL, schema, drop: () => adminQuery(`drop schema if exists ${schema} cascade`) };
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** For child processes: the URL that puts a Postgres connection in the given schema. */
export function urlWithSchema(database: TestDatabase): string {
  if (database.schema === undefined) return database.url;
  const url = new URL(database.url);
  url.searchParams.set('options', `-c search_path=${database.schema}`);
  return url.toString();
}

/** The same database handle (or transaction), recording in `sent` every statement sent through it. */
export function recordingStatements<Handle extends Pick<Kysely<DB>, 'executeQuery'>>(db: Handle, sent: CompiledQuery[]): Handle {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'executeQuery') return (query: CompiledQuery) => (sent.push(query), target.executeQuery(query));
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
