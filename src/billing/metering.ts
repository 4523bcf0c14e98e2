import { inTransaction, type Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import {
  accountsWithUnmeteredTime,
  findMeter,
  lockBillingAccount,
  lockBillingAccounts,
  runningMetersOf,
  updateMeters,
  upsertMeter,
  type BillingAccountRow,
  type MeterRow,
} from './billing.repository.ts';
import { appendEntries, stopMachinesOf, type NewEntry } from './ledger.ts';
import { costOf } from './money.ts';

/**
 * Metering of `running` time, exact over a machine's life.
 *
 * Each machine has a meter whose watermark `metered_until` says up to when
 * its running time is charged. A charge moves the watermark to now, adds the
 * time to the machine's total, and appends the difference between the total's
 * cost (rounded up once) and what was charged before: all in one transaction
 * with the ledger entry and the balance, under the account's billing lock.
 * A process killed before its commit leaves the watermark where it was, so
 * the next charge covers that time; two processes charging the same machine
 * apply one after the other, and the second finds the watermark moved.
 */

/** The machine as metering needs it (the machines domain's row fits). */
export interface MeteredMachine {
  id: string;
  account_id: string;
  name: string;
  size: string;
}

/** How many accounts one transaction of a metering pass charges. */
const ACCOUNTS_PER_TRANSACTION = 250;
/** On PostgreSQL, how many of those transactions run at once (each on a connection of its own). */
const PARALLEL_TRANSACTIONS = 3;

/** The price per hour of a machine of `size` in `status`, or null for a status that is not metered. */
function priceOf(deps: Deps, size: string, status: string): number | null {
  if (status === 'running') return deps.config.billing.pricesMicrosPerHour[size] ?? 0;
  if (status === 'paused') return deps.config.billing.pausedPricesMicrosPerHour[size] ?? 0;
  return null;
}

type MeterUpdate = Pick<MeterRow, 'machine_id' | 'metered_until' | 'metered_ms' | 'charged_micros' | 'updated_at'>;

/**
 * The charge of a running meter up to `now`: null when nothing is due yet
 * (the watermark then stays, so the time is charged with the next one).
 * `closing`: the machine leaves `running`; its watermark is cleared.
 */
export function chargeUpTo(meter: MeterRow, now: number, closing: boolean): { update: MeterUpdate; entry: NewEntry | null } | null {
  const from = meter.metered_until!;
  const totalMs = meter.metered_ms + Math.max(0, now - from);
  const total = costOf(totalMs, meter.price_micros);
  const amount = total - meter.charged_micros;
  if (amount <= 0 && !closing) return null;
  return {
    update: { machine_id: meter.machine_id, metered_until: closing ? null : Math.max(now, from), metered_ms: totalMs, charged_micros: total, updated_at: now },
    entry: amount > 0 ? { kind: 'usage', amount: -amount, machineId: meter.machine_id, periodStart: from, periodEnd: Math.max(now, from) } : null,
  };
}

/**
 * The totals of a meter moved to a new price: its time becomes the time that
 * costs the same at the new price (rounded down, so never more than was
 * charged), so that a machine going between running and paused is still
 * rounded up once over its life rather than once per period. At a price of
 * zero nothing can carry: the totals start again.
 */
export function carriedTotals(meter: Pick<MeterRow, 'price_micros' | 'metered_ms' | 'charged_micros'> | undefined, price: number): { metered_ms: number; charged_micros: number } {
  if (meter === undefined || price === 0 || meter.price_micros === 0) return { metered_ms: 0, charged_micros: 0 };
  if (meter.price_micros === price) return { metered_ms: meter.metered_ms, charged_micros: meter.charged_micros };
  const equivalentMs = (BigInt(meter.metered_ms) * BigInt(meter.price_micros)) / BigInt(price);
  return { metered_ms: Number(equivalentMs), charged_micros: meter.charged_micros };
}

/**
 * A machine's change of state at `at` (the time the change records), in the
 * transaction of the change (the machines domain calls it from its one
 * compare-and-set): becoming `running` or `paused` starts its meter at that
 * state's price, leaving it charges the rest of its time and stops the meter
 * (a change between the two does both).
 */
export async function meterTransition(deps: Deps, tx: Tx, machine: MeteredMachine, from: string, to: string, at: number): Promise<void> {
  if (!deps.config.billing.enabled) return;
  const closing = priceOf(deps, machine.size, from) !== null;
  const opening = priceOf(deps, machine.size, to);
  if (!closing && opening === null) return;
  const now = at;
  const account = await lockBillingAccount(tx.db, machine.account_id, now);
  let meter = await findMeter(tx.db, machine.id);
  if (closing && meter !== undefined && meter.metered_until !== null) {
    const charge = chargeUpTo(meter, now, true)!;
    await updateMeters(tx.db, [charge.update]);
    if (charge.entry !== null) await appendEntries(deps, tx, [{ account, entries: [charge.entry] }], now);
    meter = { ...meter, ...charge.update };
  }
  if (opening === null) return;
  if (meter !== undefined && meter.metered_until !== null) return;
  await upsertMeter(tx.db, {
    machine_id: machine.id,
    account_id: machine.account_id,
    name: machine.name,
    size: machine.size,
    price_micros: opening,
    metered_until: now,
    ...carriedTotals(meter, opening),
    updated_at: now,
  });
  // Booted (or resumed) while the balance ran out: it stops again within the metering interval at the latest, here at once.
  if (account.balance_micros <= 0) await stopMachinesOf(deps, tx, machine.account_id);
}

/** Charges the running meters of these accounts up to `now`, in one transaction. */
async function chargeAccounts(deps: Deps, tx: Tx, accountIds: readonly string[], now: number): Promise<number> {
  const accounts = await lockBillingAccounts(tx.db, accountIds);
  const meters = await runningMetersOf(tx.db, accountIds);
  const byAccount = new Map<string, { account: BillingAccountRow; entries: NewEntry[]; running: boolean }>();
  for (const account of accounts) byAccount.set(account.account_id, { account, entries: [], running: false });
  const updates: MeterUpdate[] = [];
  for (const meter of meters) {
    const slot = byAccount.get(meter.account_id);
    if (slot === undefined) continue;
    slot.running = true;
    const charge = chargeUpTo(meter, now, false);
    if (charge === null) continue;
    updates.push(charge.update);
    if (charge.entry !== null) slot.entries.push(charge.entry);
  }
  await updateMeters(tx.db, updates);
  const batch = [...byAccount.values()];
  await appendEntries(deps, tx, batch, now);
  // Still running on an empty balance (a stop failed, or a boot raced the last charge): stop them again.
  for (const { account, running } of batch) if (running && account.balance_micros <= 0) await stopMachinesOf(deps, tx, account.account_id);
  return updates.length;
}

/**
 * One metering pass: every running machine charged up to `now`, a few hundred
 * accounts per transaction. Answers how many meters were charged.
 */
export async function meteringPass(deps: Deps, now: number): Promise<number> {
  const accountIds = await accountsWithUnmeteredTime(deps.db, now);
  accountIds.sort();
  const chunks: string[][] = [];
  for (let i = 0; i < accountIds.length; i += ACCOUNTS_PER_TRANSACTION) chunks.push(accountIds.slice(i, i + ACCOUNTS_PER_TRANSACTION));
  // PostgreSQL charges disjoint sets of accounts side by side, on as many connections; SQLite has one writer.
  const lanes = deps.database.engine === 'postgres' ? PARALLEL_TRANSACTIONS : 1;
  let charged = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(lanes, chunks.length) }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++]!;
        const count = await inTransaction(deps.database, (tx) => chargeAccounts(deps, tx, chunk, now));
        charged += count;
      }
    }),
  );
  return charged;
}
