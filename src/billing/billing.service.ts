import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { invalidRequest } from '../http/errors.ts';
import type { Page } from '../http/pagination.ts';
import { DAY, toIso } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { amountOutOfRange, badIdempotencyKey, cardDeclined, idempotencyKeyReused, invalidCard, paymentMethodRequired } from './billing.errors.ts';
import {
  emptyBillingAccount,
  findBillingAccount,
  findLedgerEntry,
  findRecipient,
  listCreditEntries,
  listLedgerEntries,
  listUsageDays,
  lockBillingAccount,
  NO_CARD,
  updateBillingAccount,
  usageByMachine,
  type BillingAccountRow,
  type LedgerRow,
} from './billing.repository.ts';
import { findIdempotencyKey, forgetIdempotencyKey, recordIdempotencyKey, reserveIdempotencyKey } from './idempotency.repository.ts';
import { appendEntries, utcDay } from './ledger.ts';
import { formatMicros, parseMicros } from './money.ts';
import type { PaymentProvider } from './payment-provider.ts';
import { STATEMENT_POSITION, type PaymentMethodInput } from './billing.schemas.ts';
import { grantWelcomeCreditIfDue } from './welcome-credit.ts';

const MIN_TOP_UP = 5_000_000;
const MAX_TOP_UP = 1_000_000_000;
const MAX_IDEMPOTENCY_KEY = 255;
/** How long a top-up's Idempotency-Key is remembered. */
export const IDEMPOTENCY_RETENTION_MS = DAY;

export interface PaymentMethodView {
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
  createdAt: string;
}

export interface BillingView {
  balance: string;
  currency: 'usd';
  prices: { small: string; medium: string; large: string };
  /** A paused machine's price per hour, by size. */
  pausedPrices: { small: string; medium: string; large: string };
  paymentMethod: PaymentMethodView | null;
  welcomeCredit: { amount: string; grantedAt: string | null; missing: Array<'email_confirmation' | 'payment_method'> };
}

export interface TransactionView {
  id: string;
  kind: LedgerRow['kind'];
  amount: string;
  balanceAfter: string;
  machineId: string | null;
  periodStart: string | null;
  periodEnd: string | null;
  createdAt: string;
}

export interface StatementLineView {
  id: string;
  day: string;
  kind: LedgerRow['kind'];
  amount: string;
  machine: { id: string; name: string | null; size: string | null } | null;
  seconds: number | null;
  transaction: TransactionView | null;
}

export interface TopUpView {
  id: string;
  kind: 'top_up';
  amount: string;
  balanceAfter: string;
  createdAt: string;
}

function paymentMethodOf(row: BillingAccountRow): PaymentMethodView | null {
  if (row.card_reference === null) return null;
  return { brand: row.card_brand!, last4: row.card_last4!, expMonth: row.card_exp_month!, expYear: row.card_exp_year!, createdAt: toIso(row.card_created_at!) };
}

export function toTransactionView(row: LedgerRow): TransactionView {
  return {
    id: row.id,
    kind: row.kind,
    amount: formatMicros(row.amount_micros),
    balanceAfter: formatMicros(row.balance_after_micros),
    machineId: row.machine_id,
    periodStart: row.period_start === null ? null : toIso(row.period_start),
    periodEnd: row.period_end === null ? null : toIso(row.period_end),
    createdAt: toIso(row.created_at),
  };
}

function toTopUpView(row: LedgerRow): TopUpView {
  return { id: row.id, kind: 'top_up', amount: formatMicros(row.amount_micros), balanceAfter: formatMicros(row.balance_after_micros), createdAt: toIso(row.created_at) };
}

/** GET /api/billing: the balance, prices, card and where the welcome credit stands. */
export async function getBilling(deps: Deps, accountId: string): Promise<BillingView> {
  const row = (await findBillingAccount(deps.db, accountId)) ?? emptyBillingAccount(accountId, deps.clock.now());
  const holder = await findRecipient(deps.db, accountId);
  const { pricesMicrosPerHour: prices, pausedPricesMicrosPerHour: paused, welcomeCreditMicros } = deps.config.billing;
  const missing: BillingView['welcomeCredit']['missing'] = [];
  if (row.welcome_granted_at === null) {
    if (holder?.email_verified_at == null) missing.push('email_confirmation');
    if (row.card_reference === null) missing.push('payment_method');
  }
  return {
    balance: formatMicros(row.balance_micros),
    currency: 'usd',
    prices: { small: formatMicros(prices.small ?? 0), medium: formatMicros(prices.medium ?? 0), large: formatMicros(prices.large ?? 0) },
    pausedPrices: { small: formatMicros(paused.small ?? 0), medium: formatMicros(paused.medium ?? 0), large: formatMicros(paused.large ?? 0) },
    paymentMethod: paymentMethodOf(row),
    welcomeCredit: { amount: formatMicros(welcomeCreditMicros), grantedAt: row.welcome_granted_at === null ? null : toIso(row.welcome_granted_at), missing },
  };
}

/**
 * Saves the card with the payment provider (replacing any other), keeping only
 * its reference, brand, last4 and expiry; adds the welcome credit if the email
 * is confirmed already.
 * @throws AppError 400 invalid card, 402 card_declined (nothing saved).
 */
export async function savePaymentMethod(deps: Deps, provider: PaymentProvider, accountId: string, input: PaymentMethodInput): Promise<PaymentMethodView> {
  const result = await provider.saveCard(input, deps.clock.now());
  if (!result.ok) throw result.reason === 'declined' ? cardDeclined() : invalidCard(result.detail);
  const { card } = result;
  const now = deps.clock.now();
  const previous = await inTransaction(deps.database, async (tx) => {
    const row = await lockBillingAccount(tx.db, accountId, now);
    await updateBillingAccount(tx.db, accountId, {
      card_reference: card.reference,
      card_brand: card.brand,
      card_last4: card.last4,
      card_exp_month: card.expMonth,
      card_exp_year: card.expYear,
      card_created_at: now,
      updated_at: now,
    });
    await grantWelcomeCreditIfDue(deps, tx, accountId);
    return row.card_reference;
  });
  if (previous !== null) await forgetCard(deps, provider, previous);
  return { brand: card.brand, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear, createdAt: toIso(now) };
}

async function forgetCard(deps: Deps, provider: PaymentProvider, reference: string): Promise<void> {
  try {
    await provider.removeCard(reference);
  } catch (err) {
    deps.logger.warn({ err }, 'the payment provider failed to remove a replaced card');
  }
}

/** DELETE /api/billing/payment-method: the card is forgotten (a no-op without one). */
export async function deletePaymentMethod(deps: Deps, provider: PaymentProvider, accountId: string): Promise<void> {
  const now = deps.clock.now();
  const previous = await inTransaction(deps.database, async (tx) => {
    const row = await lockBillingAccount(tx.db, accountId, now);
    if (row.card_reference === null) return null;
    await updateBillingAccount(tx.db, accountId, { ...NO_CARD, updated_at: now });
    return row.card_reference;
  });
  if (previous !== null) await forgetCard(deps, provider, previous);
}

/**
 * Charges the saved card and credits the balance. With an Idempotency-Key, a
 * retry (even one racing the first) answers the first top-up and charges
 * nothing more: the key is reserved before the charge, the processor is given
 * a key derived from it (its own idempotency), and the ledger entry is
 * recorded once, under the account's billing lock.
 * @throws AppError 400 bad amount or key, 402 card_declined, 409 payment_method_required.
 */
export async function topUp(deps: Deps, provider: PaymentProvider, accountId: string, amountText: string, idempotencyKey: string | undefined): Promise<TopUpView> {
  const amount = parseMicros(amountText);
  if (amount === null || amount < MIN_TOP_UP || amount > MAX_TOP_UP) throw amountOutOfRange();
  if (idempotencyKey !== undefined && (idempotencyKey.length < 1 || idempotencyKey.length > MAX_IDEMPOTENCY_KEY)) throw badIdempotencyKey();
  const now = deps.clock.now();

  if (idempotencyKey !== undefined) {
    const kept = await findIdempotencyKey(deps.db, accountId, idempotencyKey, now - IDEMPOTENCY_RETENTION_MS);
    if (kept !== undefined && kept.amount_micros !== amount) throw idempotencyKeyReused();
    if (kept?.transaction_id) return toTopUpView((await findLedgerEntry(deps.db, accountId, kept.transaction_id))!);
  }
  const card = (await findBillingAccount(deps.db, accountId))?.card_reference ?? null;
  if (card === null) throw paymentMethodRequired();
  if (idempotencyKey !== undefined) await reserveIdempotencyKey(deps.db, { account_id: accountId, key: idempotencyKey, amount_micros: amount, transaction_id: null, created_at: now });

  const charge = await provider.charge(card, amount, idempotencyKey === undefined ? `topup:${newId('txn', now)}` : `topup:${accountId}:${idempotencyKey}`);
  if (!charge.ok) {
    if (idempotencyKey !== undefined) await forgetIdempotencyKey(deps.db, accountId, idempotencyKey);
    throw cardDeclined();
  }
  const entry = await inTransaction(deps.database, async (tx) => {
    const account = await lockBillingAccount(tx.db, accountId, deps.clock.now());
    if (idempotencyKey !== undefined) {
      // A retry racing this one may have recorded the same charge first.
      const kept = await findIdempotencyKey(tx.db, accountId, idempotencyKey, 0);
      if (kept?.transaction_id) return (await findLedgerEntry(tx.db, accountId, kept.transaction_id))!;
    }
    const [row] = await appendEntries(deps, tx, [{ account, entries: [{ kind: 'top_up', amount }] }], deps.clock.now());
    if (idempotencyKey !== undefined) await recordIdempotencyKey(tx.db, accountId, idempotencyKey, row!.id);
    return row!;
  });
  return toTopUpView(entry);
}

export async function listTransactions(deps: Deps, accountId: string, limit: number, cursor: string | undefined): Promise<Page<TransactionView>> {
  const rows = await listLedgerEntries(deps.db, accountId, { limit: limit + 1, before: cursor });
  const data = rows.slice(0, limit).map(toTransactionView);
  return { data, nextCursor: rows.length > limit ? data[data.length - 1]!.id : null };
}

/**
 * The statement, newest day first: a line per machine and UTC day its usage
 * was charged (however many charges made it), and each credit (the welcome
 * credit, top-ups) as a line of its own. Both lists are read from where the
 * page starts, one more line than the page each, and merged by line id.
 */
export async function getStatement(deps: Deps, accountId: string, limit: number, cursor: string | undefined): Promise<Page<StatementLineView>> {
  const position = cursor === undefined ? undefined : positionOf(cursor);
  const creditsBefore = position === undefined ? undefined : position.key.startsWith('txn_') ? { id: position.key } : { dayStart: Date.parse(`${position.day}T00:00:00.000Z`) };
  const [usage, credits] = await Promise.all([
    listUsageDays(deps.db, accountId, limit + 1, position),
    listCreditEntries(deps.db, accountId, limit + 1, creditsBefore),
  ]);
  const lines: StatementLineView[] = [
    ...usage.map((row) => ({
      id: `${row.day}/${row.machine_id}`,
      day: row.day,
      kind: 'usage' as const,
      amount: formatMicros(row.amount_micros),
      machine: { id: row.machine_id, name: row.name, size: row.size },
      seconds: row.ms / 1000,
      transaction: null,
    })),
    ...credits.map((row) => {
      const day = utcDay(row.created_at);
      return { id: `${day}/${row.id}`, day, kind: row.kind, amount: formatMicros(row.amount_micros), machine: null, seconds: null, transaction: toTransactionView(row) };
    }),
  ];
  lines.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const data = lines.slice(0, limit);
  return { data, nextCursor: lines.length > limit ? data[data.length - 1]!.id : null };
}

/** The day and key of a statement cursor (the route's schema checked its form). */
function positionOf(cursor: string): { day: string; key: string } {
  const [, day, key] = new RegExp(STATEMENT_POSITION).exec(cursor) ?? [];
  if (day === undefined || key === undefined || Number.isNaN(Date.parse(`${day}T00:00:00.000Z`))) throw invalidRequest('cursor must be the nextCursor of a previous page.');
  return { day, key };
}

function parseTime(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const time = Date.parse(text);
  if (Number.isNaN(time)) throw invalidRequest(`${name} must be an ISO 8601 date-time.`);
  return time;
}

/** Usage charged per machine for periods that ended in (from, to]. */
export async function getUsage(deps: Deps, accountId: string, query: { from?: string; to?: string }) {
  const to = parseTime('to', query.to, deps.clock.now());
  const from = parseTime('from', query.from, to - 30 * DAY);
  if (from > to) throw invalidRequest('from must not be after to.');
  const rows = await usageByMachine(deps.db, accountId, from, to);
  const total = rows.reduce((sum, row) => sum + row.micros, 0);
  return {
    from: toIso(from),
    to: toIso(to),
    total: formatMicros(total),
    machines: rows.map((row) => ({ machineId: row.machine_id, name: row.name, size: row.size, seconds: row.ms / 1000, amount: formatMicros(row.micros) })),
  };
}
