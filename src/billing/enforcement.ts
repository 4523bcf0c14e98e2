import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { jobType } from '../jobs/job-kind.ts';
import { findBillingAccount, findRecipient, type BillingAccountRow } from './billing.repository.ts';
import { MICROS_PER_USD } from './money.ts';

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

/** The 402 of an empty balance; `nextStep` says what brings money to this account. */
export const paymentRequired = (nextStep: string) => new AppError(402, 'payment_required', `The balance is empty. ${nextStep}`);

const CONFIRM_EMAIL = 'confirm your email address (the link in the confirmation mail; POST /api/me/verify-email sends a new one)';

/**
 * What an account with an empty balance has to do next, in one sentence: the
 * welcome credit's missing half (or both), or a top-up once the credit is spent.
 * A new user reads it in the dashboard's create dialog and in the 402 alike.
 */
async function nextStepToPay(deps: Deps, accountId: string, account: BillingAccountRow | undefined): Promise<string> {
  const { welcomeCreditMicros, paymentProvider } = deps.config.billing;
  const addCard = `add a card (the Billing page, or PUT /api/billing/payment-method${paymentProvider === 'simulated' ? '; in test mode the card 4242 4242 4242 4242 is accepted and never charged' : ''})`;
  const credit = `the welcome credit of $${(welcomeCreditMicros / MICROS_PER_USD).toFixed(2)}`;
  const topUp = 'Top up on the Billing page (POST /api/billing/top-ups), then try again.';
  if (welcomeCreditMicros === 0 || (account?.welcome_granted_at ?? null) !== null) return topUp;
  const confirmed = (await findRecipient(deps.db, accountId))?.email_verified_at != null;
  const hasCard = (account?.card_reference ?? null) !== null;
  if (!confirmed && !hasCard) return `For ${credit}, ${CONFIRM_EMAIL} and ${addCard}, then try again.`;
  if (!hasCard) return `Your email address is confirmed: ${addCard} and ${credit} arrives at once. Then try again.`;
  if (!confirmed) return `A card is saved: ${CONFIRM_EMAIL} and ${credit} arrives at once. Then try again.`;
  return topUp;
}

/** True when billing is on and the account's balance is zero or below (an account billing has never seen has none). */
export async function balanceIsEmpty(deps: Deps, accountId: string, db: Kysely<DB> = deps.db): Promise<boolean> {
  if (!deps.config.billing.enabled) return false;
  const account = await findBillingAccount(db, accountId);
  return (account?.balance_micros ?? 0) <= 0;
}

/**
 * Creating, starting or claiming a machine needs a balance above zero.
 * @throws AppError 402 payment_required, naming the next step (nextStepToPay).
 */
export async function requireBalance(deps: Deps, accountId: string): Promise<void> {
  if (!deps.config.billing.enabled) return;
  const account = await findBillingAccount(deps.db, accountId);
  if ((account?.balance_micros ?? 0) > 0) return;
  throw paymentRequired(await nextStepToPay(deps, accountId, account));
}
