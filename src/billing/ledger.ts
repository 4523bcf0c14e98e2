import type { Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { newIdAfter } from '../shared/ids.ts';
import { balanceEmptyMailJob, lowBalanceMailJob } from './billing.job-types.ts';
import { addUsageDays, insertLedgerEntries, latestLedgerIds, updateBalances, type BillingAccountRow, type LedgerRow, type UsageDayRow } from './billing.repository.ts';
import type { LedgerKind } from './billing.tables.ts';
import { balanceEmptyStopJob } from './enforcement.ts';
import { formatMicros } from './money.ts';

export interface NewEntry {
  kind: LedgerKind;
  amount: number;
  machineId?: string;
  periodStart?: number;
  periodEnd?: number;
}

/**
 * Appends entries to accounts' ledgers and moves their balances by the same
 * amounts, in the caller's transaction, under the accounts' billing locks
 * (the rows given are the locked ones, and are updated in place). What a
 * balance crossing calls for (the low-balance or empty mail, the stop of the
 * account's machines) is enqueued in the same transaction.
 * Answers the entries written, in order.
 *
 * Each new entry's id sorts after the account's newest: the ledger is listed
 * by id, and each entry's balance follows the one before it, so id order must
 * be the order the lock applied them in. `now` may be older than an entry
 * another process wrote while this one waited for the lock.
 */
export async function appendEntries(deps: Deps, tx: Tx, batch: ReadonlyArray<{ account: BillingAccountRow; entries: readonly NewEntry[] }>, now: number): Promise<LedgerRow[]> {
  const latest = await latestLedgerIds(tx.db, batch.flatMap(({ account, entries }) => (entries.length > 0 ? [account.account_id] : [])));
  const rows: LedgerRow[] = [];
  const balances: Array<{ account_id: string; balance_micros: number; updated_at: number }> = [];
  const crossings: Array<{ accountId: string; before: number; after: number }> = [];
  for (const { account, entries } of batch) {
    if (entries.length === 0) continue;
    const before = account.balance_micros;
    let balance = before;
    for (const entry of entries) {
      balance += entry.amount;
      rows.push({
        id: newIdAfter('txn', now, latest.get(account.account_id)),
        account_id: account.account_id,
        kind: entry.kind,
        amount_micros: entry.amount,
        balance_after_micros: balance,
        machine_id: entry.machineId ?? null,
        period_start: entry.periodStart ?? null,
        period_end: entry.periodEnd ?? null,
        created_at: now,
      });
    }
    account.balance_micros = balance;
    account.updated_at = now;
    balances.push({ account_id: account.account_id, balance_micros: balance, updated_at: now });
    crossings.push({ accountId: account.account_id, before, after: balance });
  }
  await insertLedgerEntries(tx.db, rows);
  await addUsageDays(tx.db, usageDays(rows));
  await updateBalances(tx.db, balances);
  for (const crossing of crossings) await onBalanceChange(deps, tx, crossing.accountId, crossing.before, crossing.after);
  return rows;
}

/** The UTC day (`YYYY-MM-DD`) of a time: the statement's usage lines are per machine and day. */
export function utcDay(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}

/**
 * What usage entries add to the statement's lines: each counts on the UTC day
 * its period ends (as /api/billing/usage counts it), summed per line, since a
 * batch may hold several entries of one machine and day.
 */
function usageDays(rows: readonly LedgerRow[]): UsageDayRow[] {
  const lines = new Map<string, UsageDayRow>();
  for (const row of rows) {
    if (row.kind !== 'usage' || row.machine_id === null || row.period_start === null || row.period_end === null) continue;
    const day = utcDay(row.period_end);
    const key = `${row.account_id} ${day} ${row.machine_id}`;
    const line = lines.get(key);
    if (line === undefined) lines.set(key, { account_id: row.account_id, day, machine_id: row.machine_id, amount_micros: row.amount_micros, ms: row.period_end - row.period_start });
    else {
      line.amount_micros += row.amount_micros;
      line.ms += row.period_end - row.period_start;
    }
  }
  return [...lines.values()];
}

/** A mail once per crossing: down through LOW_BALANCE, or down to zero (which also stops the account's machines). */
async function onBalanceChange(deps: Deps, tx: Tx, accountId: string, before: number, after: number): Promise<void> {
  if (!deps.config.billing.enabled) return;
  if (before > 0 && after <= 0) {
    await deps.jobs.enqueue(tx, balanceEmptyMailJob, [{ payload: { accountId, balance: formatMicros(after) } }]);
    await stopMachinesOf(deps, tx, accountId);
  } else if (before >= deps.config.billing.lowBalanceMicros && after < deps.config.billing.lowBalanceMicros) {
    await deps.jobs.enqueue(tx, lowBalanceMailJob, [{ payload: { accountId, balance: formatMicros(after) } }]);
  }
}

/** The account's starting and running machines are to stop (reason balance-empty): one job per account, done by the machines domain. */
export async function stopMachinesOf(deps: Deps, tx: Tx, accountId: string): Promise<void> {
  await deps.jobs.schedule(tx, balanceEmptyStopJob, accountId, { accountId }, deps.clock.now());
}
