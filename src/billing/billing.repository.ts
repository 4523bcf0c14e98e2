import { CompiledQuery, sql, type Kysely } from 'kysely';
import { batchSelect, batchValues, cachedText, insertRows, placeholders, updateRows, type Columns } from '../db/batch.ts';
import { dialectOf } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import type { BillingAccountsTable, BillingLedgerTable, BillingMetersTable, BillingUsageDaysTable, LedgerKind } from './billing.tables.ts';

export type BillingAccountRow = BillingAccountsTable;
export type LedgerRow = BillingLedgerTable;
export type MeterRow = BillingMetersTable;
export type UsageDayRow = BillingUsageDaysTable;

/** The card columns of an account without a card: the one list of what a saved card is. */
export const NO_CARD = {
  card_reference: null,
  card_brand: null,
  card_last4: null,
  card_exp_month: null,
  card_exp_year: null,
  card_created_at: null,
} as const satisfies Partial<BillingAccountRow>;

/** Answers a billing row as it would be if none existed yet (no credit, no card). */
export function emptyBillingAccount(accountId: string, now: number): BillingAccountRow {
  return { account_id: accountId, balance_micros: 0, welcome_granted_at: null, ...NO_CARD, created_at: now, updated_at: now };
}

export async function findBillingAccount(db: Kysely<DB>, accountId: string): Promise<BillingAccountRow | undefined> {
  return db.selectFrom('billing_accounts').selectAll().where('account_id', '=', accountId).executeTakeFirst();
}

/**
 * The account's billing row, created if need be and locked until the
 * transaction ends: every change of a balance, a card or the welcome credit
 * takes this lock first, so they apply one after another across processes.
 * SQLite needs no lock: its write transactions already run one at a time.
 */
export async function lockBillingAccount(db: Kysely<DB>, accountId: string, now: number): Promise<BillingAccountRow> {
  await db.insertInto('billing_accounts').values(emptyBillingAccount(accountId, now)).onConflict((oc) => oc.column('account_id').doNothing()).execute();
  let query = db.selectFrom('billing_accounts').selectAll().where('account_id', '=', accountId);
  if (dialectOf(db) === 'postgres') query = query.forUpdate();
  return query.executeTakeFirstOrThrow();
}

/** Several accounts' rows, locked in id order (so two lockers never wait on each other in a circle). Rows must exist. */
export async function lockBillingAccounts(db: Kysely<DB>, accountIds: readonly string[]): Promise<BillingAccountRow[]> {
  if (accountIds.length === 0) return [];
  let query = db.selectFrom('billing_accounts').selectAll().where('account_id', 'in', accountIds).orderBy('account_id');
  if (dialectOf(db) === 'postgres') query = query.forUpdate();
  return query.execute();
}

export async function updateBillingAccount(db: Kysely<DB>, accountId: string, changes: Partial<Omit<BillingAccountRow, 'account_id'>>): Promise<void> {
  await db.updateTable('billing_accounts').set(changes).where('account_id', '=', accountId).execute();
}

const BALANCE_COLUMNS: Columns<{ account_id: string; balance_micros: number; updated_at: number }> = [
  ['account_id', 'text'],
  ['balance_micros', 'bigint'],
  ['updated_at', 'bigint'],
];

export async function updateBalances(db: Kysely<DB>, rows: ReadonlyArray<{ account_id: string; balance_micros: number; updated_at: number }>): Promise<void> {
  for (let i = 0; i < rows.length; i += CHUNK) await updateRows(db, 'billing_accounts', BALANCE_COLUMNS, rows.slice(i, i + CHUNK));
}

/** Rows per statement: well under PostgreSQL's 65,535 parameters. */
const CHUNK = 1000;

const LEDGER_COLUMNS: Columns<LedgerRow> = [
  ['id', 'text'],
  ['account_id', 'text'],
  ['kind', 'text'],
  ['amount_micros', 'bigint'],
  ['balance_after_micros', 'bigint'],
  ['machine_id', 'text'],
  ['period_start', 'bigint'],
  ['period_end', 'bigint'],
  ['created_at', 'bigint'],
];

export async function insertLedgerEntries(db: Kysely<DB>, rows: readonly LedgerRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += CHUNK) await insertRows(db, 'billing_ledger', LEDGER_COLUMNS, rows.slice(i, i + CHUNK));
}

/** Each account's newest ledger entry id (accounts without entries are left out). One `max` per account: each reads one end of the account's index. */
export async function latestLedgerIds(db: Kysely<DB>, accountIds: readonly string[]): Promise<Map<string, string>> {
  if (accountIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('billing_accounts as a')
    .select(['a.account_id', (eb) => eb.selectFrom('billing_ledger as l').select((inner) => inner.fn.max('l.id').as('id')).whereRef('l.account_id', '=', 'a.account_id').as('id')])
    .where('a.account_id', 'in', accountIds)
    .execute();
  return new Map(rows.flatMap((row) => (row.id === null ? [] : [[row.account_id, row.id] as const])));
}

export async function findLedgerEntry(db: Kysely<DB>, accountId: string, id: string): Promise<LedgerRow | undefined> {
  return db.selectFrom('billing_ledger').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
}

export async function listLedgerEntries(db: Kysely<DB>, accountId: string, options: { limit: number; before: string | undefined; kind?: LedgerKind }): Promise<LedgerRow[]> {
  let query = db.selectFrom('billing_ledger').selectAll().where('account_id', '=', accountId);
  if (options.before !== undefined) query = query.where('id', '<', options.before);
  if (options.kind !== undefined) query = query.where('kind', '=', options.kind);
  return query.orderBy('id', 'desc').limit(options.limit).execute();
}

const USAGE_DAY_COLUMNS: Columns<UsageDayRow> = [
  ['account_id', 'text'],
  ['day', 'text'],
  ['machine_id', 'text'],
  ['amount_micros', 'bigint'],
  ['ms', 'bigint'],
];

/**
 * Adds each row's amount and time into its statement line (account, day,
 * machine), creating the lines that do not exist yet: one statement per
 * batch. A line appears at most once per batch (PostgreSQL refuses to update
 * a row twice in one statement): the caller sums them first.
 */
export async function addUsageDays(db: Kysely<DB>, rows: readonly UsageDayRow[]): Promise<void> {
  const dialect = dialectOf(db);
  for (let i = 0; i < rows.length; i += CHUNK) {
    const chunk = rows.slice(i, i + CHUNK);
    const text = cachedText(`usage-days;${dialect === 'postgres' ? '' : chunk.length};${dialect}`, () => {
      const { select } = batchSelect(dialect, USAGE_DAY_COLUMNS, chunk.length, placeholders(dialect));
      // `where true`: SQLite reads an upsert's ON CONFLICT after a bare SELECT as a join's ON.
      return 'insert into billing_usage_days (account_id, "day", machine_id, amount_micros, ms) ' +
        `select account_id, "day", machine_id, amount_micros, ms from (${select}) as v where true ` +
        'on conflict (account_id, "day", machine_id) do update set ' +
        'amount_micros = billing_usage_days.amount_micros + excluded.amount_micros, ms = billing_usage_days.ms + excluded.ms';
    });
    await db.executeQuery(CompiledQuery.raw(text, batchValues(dialect, USAGE_DAY_COLUMNS, chunk)));
  }
}

/** Where a statement page starts: after the line at (day, key), key a machine id or a transaction id. */
export interface StatementPosition {
  day: string;
  key: string;
}

/**
 * An account's usage lines, newest day first and, within a day, by machine id
 * descending (one walk of the key), after `before`; with the machine's name and
 * size as they are now, or as it was metered once the machine is gone.
 */
export async function listUsageDays(
  db: Kysely<DB>,
  accountId: string,
  limit: number,
  before: StatementPosition | undefined,
): Promise<Array<UsageDayRow & { name: string | null; size: string | null }>> {
  let query = db
    .selectFrom('billing_usage_days as d')
    .leftJoin('machines as m', 'm.id', 'd.machine_id')
    .leftJoin('billing_meters as bm', 'bm.machine_id', 'd.machine_id')
    .select(['d.account_id', 'd.day', 'd.machine_id', 'd.amount_micros', 'd.ms', (eb) => eb.fn.coalesce('m.name', 'bm.name').as('name'), (eb) => eb.fn.coalesce('m.size', 'bm.size').as('size')])
    .where('d.account_id', '=', accountId);
  if (before !== undefined) query = query.where((eb) => eb(eb.refTuple('d.day', 'd.machine_id'), '<', eb.tuple(before.day, before.key)));
  const rows = await query.orderBy('d.day', 'desc').orderBy('d.machine_id', 'desc').limit(limit).execute();
  return rows.map((row) => ({ ...row, amount_micros: Number(row.amount_micros), ms: Number(row.ms) }));
}

/**
 * An account's credits (every entry but usage), newest first, through their
 * own index. `before` by id when the page ended on a credit, else by day: the
 * credits of days before the one the page ended on (a day's credits come
 * before its usage lines).
 */
export async function listCreditEntries(db: Kysely<DB>, accountId: string, limit: number, before: { id: string } | { dayStart: number } | undefined): Promise<LedgerRow[]> {
  // The kind as a literal: a partial index serves only a query that names its condition (a parameter could be anything).
  let query = db.selectFrom('billing_ledger').selectAll().where('account_id', '=', accountId).where('kind', '<>', sql.lit('usage'));
  if (before !== undefined) query = 'id' in before ? query.where('id', '<', before.id) : query.where('created_at', '<', before.dayStart);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/** Usage charged per machine for periods ending in (from, to], with the machine's name and size as they are now (a claimed pool machine was renamed). */
export async function usageByMachine(
  db: Kysely<DB>,
  accountId: string,
  from: number,
  to: number,
): Promise<Array<{ machine_id: string; name: string | null; size: string | null; ms: number; micros: number }>> {
  const rows = await db
    .selectFrom('billing_ledger as l')
    .leftJoin('machines as m', 'm.id', 'l.machine_id')
    .select([
      'l.machine_id',
      'm.name',
      'm.size',
      sql<number>`sum(l.period_end - l.period_start)`.as('ms'),
      sql<number>`sum(-l.amount_micros)`.as('micros'),
    ])
    .where('l.account_id', '=', accountId)
    .where('l.kind', '=', 'usage')
    .where('l.period_end', '>', from)
    .where('l.period_end', '<=', to)
    .groupBy(['l.machine_id', 'm.name', 'm.size'])
    .orderBy('l.machine_id')
    .execute();
  return rows.map((row) => ({ machine_id: row.machine_id!, name: row.name, size: row.size, ms: Number(row.ms), micros: Number(row.micros) }));
}

export async function findMeter(db: Kysely<DB>, machineId: string): Promise<MeterRow | undefined> {
  return db.selectFrom('billing_meters').selectAll().where('machine_id', '=', machineId).executeTakeFirst();
}

export async function upsertMeter(db: Kysely<DB>, row: MeterRow): Promise<void> {
  await db
    .insertInto('billing_meters')
    .values(row)
    .onConflict((oc) =>
      oc.column('machine_id').doUpdateSet({
        name: row.name,
        size: row.size,
        price_micros: row.price_micros,
        metered_until: row.metered_until,
        metered_ms: row.metered_ms,
        charged_micros: row.charged_micros,
        updated_at: row.updated_at,
      }),
    )
    .execute();
}

/** Accounts with a running machine whose time up to `before` is not charged yet. */
export async function accountsWithUnmeteredTime(db: Kysely<DB>, before: number): Promise<string[]> {
  const rows = await db.selectFrom('billing_meters').select('account_id').distinct().where('metered_until', 'is not', null).where('metered_until', '<', before).execute();
  return rows.map((row) => row.account_id);
}

export async function runningMetersOf(db: Kysely<DB>, accountIds: readonly string[]): Promise<MeterRow[]> {
  if (accountIds.length === 0) return [];
  return db.selectFrom('billing_meters').selectAll().where('account_id', 'in', accountIds).where('metered_until', 'is not', null).orderBy('machine_id').execute();
}

const METER_COLUMNS: Columns<Pick<MeterRow, 'machine_id' | 'metered_until' | 'metered_ms' | 'charged_micros' | 'updated_at'>> = [
  ['machine_id', 'text'],
  ['metered_until', 'bigint'],
  ['metered_ms', 'bigint'],
  ['charged_micros', 'bigint'],
  ['updated_at', 'bigint'],
];

export async function updateMeters(db: Kysely<DB>, rows: ReadonlyArray<Pick<MeterRow, 'machine_id' | 'metered_until' | 'metered_ms' | 'charged_micros' | 'updated_at'>>): Promise<void> {
  for (let i = 0; i < rows.length; i += CHUNK) await updateRows(db, 'billing_meters', METER_COLUMNS, rows.slice(i, i + CHUNK));
}

/** Whom a billing mail goes to: the account's own row, read as it is joined in elsewhere. */
export async function findRecipient(db: Kysely<DB>, accountId: string): Promise<{ email: string; name: string; email_verified_at: number | null } | undefined> {
  return db.selectFrom('accounts').select(['email', 'name', 'email_verified_at']).where('id', '=', accountId).executeTakeFirst();
}

export async function deleteOldIdempotencyKeys(db: Kysely<DB>, before: number): Promise<void> {
  await db.deleteFrom('billing_idempotency').where('created_at', '<', before).execute();
}
