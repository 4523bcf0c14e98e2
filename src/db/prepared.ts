import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { DB } from './database.ts';

/** SQL texts that PostgreSQL keeps as named prepared statements (see preferPrepared), by text. */
const statementNames = new Map<string, string>();
/** A bound on what each connection prepares: hot statements are a few dozen. */
const MAX_STATEMENT_NAMES = 1000;

/**
 * Marks a hot SQL text to be sent to PostgreSQL as a named prepared
 * statement, so each connection parses and plans it once instead of on
 * every execution (a third of the server's CPU for an emit). Only fixed
 * texts with explicit column lists belong here: a prepared `select *` fails
 * once a column is added ("cached plan must not change result type").
 */
export function preferPrepared(sql: string): void {
  if (!statementNames.has(sql) && statementNames.size < MAX_STATEMENT_NAMES) statementNames.set(sql, `hot_${statementNames.size}`);
}

/** The prepared statement's name for a SQL text marked by preferPrepared. */
export function preparedStatementName(sql: string): string | undefined {
  return statementNames.get(sql);
}

/** Stands for the i-th argument while the query is compiled once. */
const placeholder = (index: number) => `\u0000prepared:${index}\u0000`;
const PLACEHOLDER = /^\u0000prepared:(\d+)\u0000$/;

export interface Prepared<Args extends unknown[], Row> {
  execute(db: Kysely<DB>, ...args: Args): Promise<Row[]>;
  executeTakeFirst(db: Kysely<DB>, ...args: Args): Promise<Row | undefined>;
}

/**
 * A fixed-shape query on a hot path, built and compiled once per database
 * (the builder costs several times what SQLite takes to run the statement),
 * and a named prepared statement on PostgreSQL (see preferPrepared).
 * `build` receives stand-ins for its arguments and must use them only as
 * values, in a query whose shape does not depend on them.
 */
export function prepared<Args extends unknown[], Row>(
  arity: Args['length'],
  build: (db: Kysely<DB>, ...args: Args) => Compilable<Row>,
): Prepared<Args, Row> {
  // Keyed by the dialect's adapter, which a database and its transactions share.
  const compiled = new WeakMap<object, { sql: string; slots: Array<{ argument: number } | { value: unknown }> }>();
  const compile = (db: Kysely<DB>) => {
    const dialect = db.getExecutor().adapter;
    let entry = compiled.get(dialect);
    if (entry === undefined) {
      const stand = Array.from({ length: arity }, (_, i) => placeholder(i)) as Args;
      const query = build(db, ...stand).compile();
      entry = {
        sql: query.sql,
        slots: query.parameters.map((value) => {
          const match = typeof value === 'string' ? PLACEHOLDER.exec(value) : null;
          return match ? { argument: Number(match[1]) } : { value };
        }),
      };
      compiled.set(dialect, entry);
      preferPrepared(entry.sql);
    }
    return entry;
  };
  const execute = async (db: Kysely<DB>, ...args: Args): Promise<Row[]> => {
    const { sql, slots } = compile(db);
    const parameters = slots.map((slot) => ('argument' in slot ? args[slot.argument] : slot.value));
    return (await db.executeQuery<Row>(CompiledQuery.raw(sql, parameters))).rows;
  };
  return { execute, executeTakeFirst: async (db, ...args) => (await execute(db, ...args))[0] };
}
