import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { jobType } from '../jobs/job-kind.ts';
import { findBillingAccount } from './billing.repository.ts';

/**
 * What billing asks of the machines domain, and what it tells it (a public
 * file: machines imports it, billing never imports machines).
 *
 * `balanceEmptyStopJob`: stop every `starting` or `running` machine of the
 * account with reason `balance-empty`. Billing enqueues it, keyed by account,
 * in the transaction whose ledger entry emptied the balance; the machines
 * domain registers its kind and stops the machines through its own stop path
 * (so `machine.stopped` is emitted and delivered like any other stop).
 */
export const balanceEmptyStopJob = jobType<{ accountId: string }>('billing.balance-empty-stop');

export const paymentRequired = () =>
  new AppError(402, 'payment_required', 'The balance is empty. Add a card and confirm your email for the welcome credit, or top up, then try again.');

/** True when billing is on and the account's balance is zero or below (an account billing has never seen has none). */
export async function balanceIsEmpty(deps: Deps, accountId: string, db: Kysely<DB> = deps.db): Promise<boolean> {
  if (!deps.config.billing.enabled) return false;
  const account = await findBillingAccount(db, accountId);
  return (account?.balance_micros ?? 0) <= 0;
}

/**
 * Creating, starting or claiming a machine needs a balance above zero.
 * @throws AppError 402 payment_required.
 */
export async function requireBalance(deps: Deps, accountId: string): Promise<void> {
  if (await balanceIsEmpty(deps, accountId)) throw paymentRequired();
}
