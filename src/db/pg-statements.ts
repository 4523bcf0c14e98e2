import pg from 'pg';

/**
 * How statements reach PostgreSQL, the one place that changes it; Kysely and
 * everything above send statements as usual and know nothing of it. Two
 * techniques, each behind its option (bench/RESULTS.md has their figures):
 *
 * - PG_PREPARED_STATEMENTS: a statement text seen twice is from then on sent
 *   as a named prepared statement, which each connection parses and plans once
 *   instead of at every execution (Kysely sends every query unnamed).
 * - PG_PIPELINED_BEGIN: a transaction's BEGIN is not a round trip of its own;
 *   it is written together with the transaction's first statement, in one
 *   extended-protocol exchange with one Sync, so an error in either stops both
 *   (a transaction that runs no statement sends nothing at all).
 */
export interface StatementOptions {
  preparedStatements: boolean;
  pipelinedBegin: boolean;
}

/** Texts seen, and the name of those seen often enough. */
const seen = new Map<string, number>();
const names = new Map<string, string>();
/** Texts that must stay unnamed: their plan changed under them (a migration by another process). */
const unpreparable = new Set<string>();
/** A bound on what every connection prepares: the statements that repeat are a few dozen. */
const MAX_NAMES = 500;
const MAX_SEEN = 10_000;

function nameFor(text: string): string | undefined {
  const name = names.get(text);
  if (name !== undefined || unpreparable.has(text) || names.size >= MAX_NAMES) return name;
  const count = (seen.get(text) ?? 0) + 1;
  if (count < 2) {
    if (seen.size >= MAX_SEEN) seen.clear();
    seen.set(text, count);
    return undefined;
  }
  seen.delete(text);
  const named = `s${names.size}`;
  names.set(text, named);
  return named;
}

/** PostgreSQL refuses a prepared `select *` once its table has gained a column: "cached plan must not change result type". */
function planChanged(error: unknown): boolean {
  return (error as { code?: string }).code === '0A000' && /cached plan must not change result type/.test(String((error as Error).message));
}

/** What Kysely's driver sends to open a transaction: `begin`, or `start transaction` with settings. */
const opensTransaction = (text: string) => text === 'begin' || text.startsWith('start transaction');

/** The parts of pg's Query this file uses (its typings do not declare them). */
interface QueryInternals {
  name?: string;
  text: string;
  types?: unknown[];
  _results: unknown;
  prepare(connection: Connection): void;
  handleError(error: unknown, connection: Connection): void;
  handleReadyForQuery(connection: Connection): void;
}
interface Connection {
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  parse(message: { text: string; name: string; types: unknown[] }): void;
  bind(message: { portal: string; statement: string; values: unknown[] }): void;
  execute(message: { portal: string }): void;
}
const Query = pg.Query as unknown as new (config: pg.QueryConfig & { queryMode: 'extended' }) => QueryInternals & pg.Submittable;

/**
 * A statement preceded by the deferred BEGIN (or START TRANSACTION) on the
 * wire, with no Sync between them: the server runs both or, after an error,
 * neither; the statement's own result is the answer.
 */
class AfterBegin extends Query {
  readonly #begin: string;

  constructor(begin: string, config: pg.QueryConfig) {
    super({ ...config, queryMode: 'extended' });
    this.#begin = begin;
  }

  override prepare(connection: Connection): void {
    // pg marks a named statement parsed at the first ParseComplete of the exchange: that must be its own.
    if (this.name !== undefined && connection.parsedStatements[this.name] === undefined && connection.submittedNamedStatements[this.name] === undefined) {
      connection.parse({ text: this.text, name: this.name, types: this.types ?? [] });
      connection.submittedNamedStatements[this.name] = this.text;
    }
    connection.parse({ text: this.#begin, name: '', types: [] });
    connection.bind({ portal: '', statement: '', values: [] });
    connection.execute({ portal: '' });
    super.prepare(connection);
  }

  override handleReadyForQuery(connection: Connection): void {
    if (Array.isArray(this._results)) this._results = this._results.at(-1);
    super.handleReadyForQuery(connection);
  }
}

function sent(query: QueryInternals & pg.Submittable, client: pg.PoolClient): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    (query as unknown as { callback: (error: Error | null, result: pg.QueryResult) => void }).callback = (error, result) => (error ? reject(error) : resolve(result));
    client.query(query);
  });
}

const noRows = (command: string): pg.QueryResult => ({ command, rowCount: null, oid: 0, rows: [], fields: [] });

/** Sets a pooled connection to send its statements as the options say (see above). */
export function sendStatements(client: pg.PoolClient, options: StatementOptions): void {
  const passThrough = client.query.bind(client) as (...args: unknown[]) => unknown;
  let deferredBegin: string | null = null;

  function run(text: string, values: unknown[]): Promise<pg.QueryResult> {
    const name = options.preparedStatements ? nameFor(text) : undefined;
    const begin = deferredBegin;
    deferredBegin = null;
    if (begin === null) return passThrough(name === undefined ? { text, values } : { name, text, values }) as Promise<pg.QueryResult>;
    return sent(new AfterBegin(begin, name === undefined ? { text, values } : { name, text, values }), client);
  }

  client.query = ((text: unknown, values?: unknown, ...rest: unknown[]) => {
    // Kysely's driver calls query(text, parameters); anything else (LISTEN, a cursor, a callback) goes through untouched, after any BEGIN it follows.
    if (typeof text !== 'string' || !Array.isArray(values) || rest.length > 0) {
      if (deferredBegin !== null) {
        // Queued ahead of the call: the connection runs its queries in order. An error in it fails the call's transaction at COMMIT.
        (passThrough(deferredBegin) as Promise<unknown>).catch(() => {});
        deferredBegin = null;
      }
      return passThrough(text, values, ...rest);
    }
    if (options.pipelinedBegin && values.length === 0) {
      if (opensTransaction(text)) {
        deferredBegin = text;
        return Promise.resolve(noRows('BEGIN'));
      }
      // A transaction that ran no statement: there is nothing to end.
      if (deferredBegin !== null && (text === 'commit' || text === 'rollback')) {
        deferredBegin = null;
        return Promise.resolve(noRows(text.toUpperCase()));
      }
    }
    // After a deferred BEGIN, a failed statement has aborted its transaction: no retry could run in it.
    const opensItsTransaction = deferredBegin !== null;
    return run(text, values).catch((error: unknown) => {
      if (!planChanged(error)) throw error;
      unpreparable.add(text);
      if (opensItsTransaction) throw error;
      return passThrough({ text, values });
    });
  }) as typeof client.query;
}
