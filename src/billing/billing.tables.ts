/** Every amount is integer micro-dollars (1 USD = 1,000,000); every time epoch milliseconds. */

export type LedgerKind = 'welcome_credit' | 'top_up' | 'usage';

/** One per account that billing has touched: the balance the ledger sums to, the card, the welcome credit. */
export interface BillingAccountsTable {
  account_id: string;
  balance_micros: number;
  welcome_granted_at: number | null;
  /** The payment provider's reference to the saved card; never the number or the cvc. */
  card_reference: string | null;
  card_brand: string | null;
  card_last4: string | null;
  card_exp_month: number | null;
  card_exp_year: number | null;
  card_created_at: number | null;
  created_at: number;
  updated_at: number;
}

/** Append-only: each entry changes the balance by `amount_micros` in the same transaction. */
export interface BillingLedgerTable {
  id: string;
  account_id: string;
  kind: LedgerKind;
  amount_micros: number;
  balance_after_micros: number;
  machine_id: string | null;
  period_start: number | null;
  period_end: number | null;
  created_at: number;
}

/**
 * The statement's usage lines: one per machine and UTC day (`YYYY-MM-DD`),
 * the sums of the usage entries whose period ends that day. Each charge adds
 * into its line in the transaction that appends the entry, so the lines sum
 * to the ledger's usage exactly.
 */
export interface BillingUsageDaysTable {
  account_id: string;
  day: string;
  machine_id: string;
  /** Negative, as the ledger's usage amounts are. */
  amount_micros: number;
  ms: number;
}

/**
 * One per machine that ever ran. `metered_until` is the watermark: running time
 * up to it is charged; null while the machine is not running. `metered_ms` and
 * `charged_micros` are totals over the machine's life at `price_micros` (per
 * hour), so each charge is ceil(total × price) − charged so far: rounded once.
 */
export interface BillingMetersTable {
  machine_id: string;
  account_id: string;
  name: string;
  size: string;
  price_micros: number;
  metered_until: number | null;
  metered_ms: number;
  charged_micros: number;
  updated_at: number;
}

/** A top-up's Idempotency-Key, kept 24 h: `transaction_id` is null while its charge is under way. */
export interface BillingIdempotencyTable {
  account_id: string;
  key: string;
  amount_micros: number;
  transaction_id: string | null;
  created_at: number;
}
