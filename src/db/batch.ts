import { CompiledQuery, sql, type Kysely, type RawBuilder } from 'kysely';
import { dialectOf, type DialectName } from './connect.ts';
import type { DB } from './database.ts';

/**
 * Statements over many rows at once, for the hot paths (an event's
 * deliveries and jobs, a batch of attempts' outcomes), written as text from a
 * column list: the query builder would cost more to build them than the
 * database takes to run them. The texts are kept; the values go as
 * parameters, laid out as the engine takes a batch (see batchValues).
 */

export type ColumnType = 'text' | 'bigint' | 'integer';

/** The column names and SQL types of the rows a statement writes, in order; for updates, the key first. */
export type Columns<Row> = ReadonlyArray<readonly [keyof Row & string, ColumnType]>;

const texts = new Map<string, string>();
/** Bounds the kept texts: batch sizes vary, but only up to their caps. */
const MAX_TEXTS = 2000;

/** The text `build` writes, kept under `key` (a statement's shape: its tables, columns and row count). */
export function cachedText(key: string, build: () => string): string {
  let text = texts.get(key);
  if (text === undefined) {
    text = build();
    if (texts.size >= MAX_TEXTS) texts.clear();
    texts.set(key, text);
  }
  return text;
}

/** A short name for a column list (a module's constant), so that finding a kept text costs no string building per call. */
const columnListIds = new WeakMap<object, number>();
let nextColumnListId = 1;
function columnListId(columns: object): number {
  let id = columnListIds.get(columns);
  if (id === undefined) columnListIds.set(columns, (id = nextColumnListId++));
  return id;
}

const quoted = (name: string) => `"${name}"`;

/** Parameters as the engine writes them: `?`, or `$1`, `$2`… cast to the column's type. */
export function placeholders(dialect: 'sqlite' | 'postgres') {
  let n = 0;
  return (type?: ColumnType) => (dialect === 'sqlite' ? '?' : type ? `$${++n}::${type}` : `$${++n}`);
}

/** Rows for one table, with the columns to write. */
export interface RowsOf<Row> {
  table: keyof DB & string;
  columns: Columns<Row>;
  rows: readonly Row[];
}

/** Any table's rows, as insertAll takes them. */
// Columns<Row> is read only through its names, so every RowsOf fits.
export type AnyRows = RowsOf<never>;

/**
 * How a batch of rows goes to the engine. PostgreSQL: one JSON parameter,
 * the rows (json_to_recordset), so a statement has one text whatever its row
 * count, which each connection parses and plans once; a VALUES list would be
 * a text per row count, planned afresh at every call (about 0.9 ms for a
 * hundred rows of ten columns, a third of such an update's cost). JSON rather
 * than an array per column: JSON.stringify writes it in one piece, where
 * pg's array literals make garbage per value (bench/RESULTS.md has the
 * figures). SQLite, which plans nothing per call, takes VALUES rows, a
 * placeholder per value: a text per row count, each prepared once. Answers
 * too how to name the batch's keys (its first column), for joinsBatch.
 */
function rowsText(dialect: DialectName, columns: ReadonlyArray<readonly [string, ColumnType]>, size: number, next: (type?: ColumnType) => string): { text: string; keys: string } {
  if (dialect === 'postgres') {
    const rows = `${next()}::json`;
    const record = columns.map(([name, type]) => `${quoted(name)} ${type}`).join(', ');
    return { text: `select * from json_to_recordset(${rows}) as r(${record})`, keys: `array(select e->>'${columns[0]![0]}' from json_array_elements(${rows}) as e)` };
  }
  const rows = Array.from({ length: size }, () => `(${columns.map(([, type]) => next(type)).join(', ')})`);
  return { text: `values ${rows.join(', ')}`, keys: '' };
}

/** What tells two batches' texts apart: their row count on SQLite, nothing on PostgreSQL (see rowsText). */
function sizeKey(dialect: DialectName, size: number): string {
  return dialect === 'postgres' ? '' : `x${size}`;
}

/** Appends the rows' values as rowsText takes them: row by row on SQLite, one JSON text on PostgreSQL. */
function pushValues(dialect: DialectName, values: unknown[], { columns, rows }: AnyRows): void {
  if (dialect === 'postgres') {
    const json = JSON.stringify(rows);
    // Half a character (a lone surrogate) is written as a \ud8xx escape, which PostgreSQL refuses; as a parameter of
    // its own it would have been stored as U+FFFD. The check is a scan; the repair (rare) writes the rows again.
    values.push(json.includes('\\ud') ? JSON.stringify(rows, (_key, value: unknown) => (typeof value === 'string' ? value.toWellFormed() : value)) : json);
    return;
  }
  // Plain index loops: this runs for every value of every row written on the hot paths.
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r] as unknown as Record<string, unknown>;
    for (let c = 0; c < columns.length; c++) values.push(row[columns[c]![0]]);
  }
}

/** `column` is one of `keys`: an array parameter on PostgreSQL (one text whatever their number), a list on SQLite. */
export function isOneOf(db: Kysely<DB>, column: string, keys: readonly string[]): RawBuilder<boolean> {
  return dialectOf(db) === 'postgres' ? sql<boolean>`${sql.ref(column)} = any(${keys}::text[])` : sql<boolean>`${sql.ref(column)} in (${sql.join(keys)})`;
}

/** The parameters of a batch of rows, as batchSelect's text takes them. */
export function batchValues<Row>(dialect: DialectName, columns: Columns<Row>, rows: readonly Row[]): unknown[] {
  const values: unknown[] = [];
  pushValues(dialect, values, { columns, rows } as unknown as AnyRows);
  return values;
}

function insertText(dialect: DialectName, { table, columns, rows }: AnyRows, next: ReturnType<typeof placeholders>): string {
  return `insert into ${quoted(table)} (${columns.map(([name]) => quoted(name)).join(', ')}) ${rowsText(dialect, columns, rows.length, next).text}`;
}

/** `INSERT INTO table (columns…) VALUES (…), (…)…` */
export async function insertRows<Row>(db: Kysely<DB>, table: keyof DB & string, columns: Columns<Row>, rows: readonly Row[]): Promise<void> {
  await insertAll(db, [{ table, columns, rows } as unknown as AnyRows]);
}

/**
 * Rows of several tables, written together: on PostgreSQL in one statement
 * (each insert a data-modifying CTE of it; foreign keys between them are
 * checked at its end, when every row is there), a round trip for all; on
 * SQLite, whose statements cost no round trip, one statement per table, in order.
 */
export async function insertAll(db: Kysely<DB>, inserts: readonly AnyRows[]): Promise<void> {
  const nonEmpty = inserts.filter((insert) => insert.rows.length > 0);
  if (nonEmpty.length === 0) return;
  const dialect = dialectOf(db);
  if (dialect === 'sqlite' || nonEmpty.length === 1) {
    for (const insert of nonEmpty) {
      const text = cachedText(`insert;${insert.table}:${columnListId(insert.columns)}${sizeKey(dialect, insert.rows.length)};${dialect}`, () => insertText(dialect, insert, placeholders(dialect)));
      const values: unknown[] = [];
      pushValues(dialect, values, insert);
      await db.executeQuery(CompiledQuery.raw(text, values));
    }
    return;
  }
  let shape = dialect;
  for (const { table, columns, rows } of nonEmpty) shape += `;${table}:${columnListId(columns)}${sizeKey(dialect, rows.length)}`;
  const text = cachedText(`insert;${shape}`, () => {
    const next = placeholders(dialect);
    const ctes = nonEmpty.slice(0, -1).map((insert, i) => `w${i} as (${insertText(dialect, insert, next)})`);
    return `with ${ctes.join(', ')} ${insertText(dialect, nonEmpty.at(-1)!, next)}`;
  });
  const values: unknown[] = [];
  for (const insert of nonEmpty) pushValues(dialect, values, insert);
  await db.executeQuery(CompiledQuery.raw(text, values));
}

/**
 * A batch of `size` rows (its values as batchValues lays them out) as a
 * select of named, typed columns (VALUES names its columns `column1`,
 * `column2`…, hence the renaming on SQLite), and its keys (its first
 * column) as an array, for joinsBatch on PostgreSQL.
 */
export function batchSelect(dialect: DialectName, columns: ReadonlyArray<readonly [string, ColumnType]>, size: number, next: (type?: ColumnType) => string): { select: string; keys: string } {
  const { text, keys } = rowsText(dialect, columns, size, next);
  if (dialect === 'postgres') return { select: text, keys };
  // SQLite names a subquery's columns only through its select list.
  return { select: `select ${columns.map(([name], i) => `column${i + 1} as ${quoted(name)}`).join(', ')} from (${text}) as batch`, keys };
}

/**
 * The condition that a table's rows are a batch's, by key. PostgreSQL plans
 * the join as a hash join over the whole table unless the rows are named by
 * key too: then it walks the key's index.
 */
export function joinsBatch(dialect: DialectName, table: string, key: string, keys: string): string {
  const join = `${quoted(table)}.${quoted(key)} = v.${quoted(key)}`;
  return dialect === 'postgres' ? `${join} and ${quoted(table)}.${quoted(key)} = any(${keys})` : join;
}

/**
 * `UPDATE table SET col = v.col, … FROM (VALUES …) AS v WHERE table.key = v.key`:
 * different values for many rows in one statement. `also` is SQL
 * without parameters added to SET; `where` adds conditions `column = value`,
 * the same for every row. With `returning`, answers the keys of the rows
 * updated (else nothing: reading them back costs SQLite as much again).
 */
export async function updateRows<Row>(
  db: Kysely<DB>,
  table: keyof DB & string,
  columns: Columns<Row>,
  rows: readonly Row[],
  options: { also?: string; where?: Record<string, string>; returning?: boolean } = {},
): Promise<string[]> {
  if (rows.length === 0) return [];
  const dialect = dialectOf(db);
  const where = Object.entries(options.where ?? {});
  const [key] = columns[0]!;
  const returning = options.returning === true;
  const text = cachedText(`update;${table}:${columnListId(columns)}${sizeKey(dialect, rows.length)};${dialect};${options.also ?? ''};${where.map(([column]) => column).join(',')};${returning}`, () => {
    const next = placeholders(dialect);
    const { select, keys } = batchSelect(dialect, columns, rows.length, next);
    const set = [...columns.slice(1).map(([name]) => `${quoted(name)} = v.${quoted(name)}`), ...(options.also ? [options.also] : [])].join(', ');
    const conditions = where.map(([column]) => ` and ${quoted(table)}.${quoted(column)} = ${next('text')}`).join('');
    const answer = returning ? ` returning ${quoted(table)}.${quoted(key)} as key` : '';
    return `update ${quoted(table)} set ${set} from (${select}) as v where ${joinsBatch(dialect, table, key, keys)}${conditions}${answer}`;
  });
  const parameters = batchValues(dialect, columns, rows);
  for (const [, value] of where) parameters.push(value);
  const result = await db.executeQuery<{ key: string }>(CompiledQuery.raw(text, parameters));
  return returning ? result.rows.map((row) => row.key) : [];
}
