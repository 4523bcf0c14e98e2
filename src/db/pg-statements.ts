import type pg from 'pg';

/**
 * How statements reach PostgreSQL (PG_PREPARED_STATEMENTS), the one place that
 * changes it; Kysely and everything above send statements as usual and know
 * nothing of it: a statement text seen twice is from then on sent as a named
 * prepared statement, which each connection parses and plans once instead of
 * at every execution (Kysely sends every query unnamed). bench/RESULTS.md has
 * the figures.
 */

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

/** Sets a pooled connection to send the statements that repeat as named prepared statements. */
export function sendStatements(client: pg.PoolClient): void {
  const passThrough = client.query.bind(client) as (...args: unknown[]) => Promise<pg.QueryResult>;
  client.query = ((text: unknown, values?: unknown, ...rest: unknown[]) => {
    // Kysely's driver calls query(text, parameters); anything else (LISTEN, a cursor, a callback) goes through untouched.
    if (typeof text !== 'string' || !Array.isArray(values) || rest.length > 0) return passThrough(text, values, ...rest);
    const name = nameFor(text);
    if (name === undefined) return passThrough({ text, values });
    return passThrough({ name, text, values }).catch((error: unknown) => {
      if (!planChanged(error)) throw error;
      unpreparable.add(text);
      // Inside a transaction the failed statement has aborted it: the retry fails too, and the transaction with it, as it would have.
      return passThrough({ text, values });
    });
  }) as typeof client.query;
}
