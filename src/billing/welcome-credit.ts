import type { Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { welcomeCreditMailJob } from './billing.job-types.ts';
import { findRecipient, lockBillingAccount, updateBillingAccount } from './billing.repository.ts';
import { appendEntries } from './ledger.ts';
import { formatMicros } from './money.ts';

/**
 * The welcome credit (on email verification): added once, when the
 * account has both a confirmed email address and a saved card, whichever
 * comes second. Both changes call this in their own transaction AFTER writing
 * their half: it takes the account's billing lock, then reads the other half,
 * so of two such transactions the second to take the lock sees the first's
 * committed write (PostgreSQL re-reads a row it waited to lock) and grants it.
 * The ledger's unique index on the welcome entry is the last guard.
 * A public file: the accounts domain calls it when an address is confirmed.
 */
export async function grantWelcomeCreditIfDue(deps: Deps, tx: Tx, accountId: string): Promise<void> {
  if (!deps.config.billing.enabled) return;
  const now = deps.clock.now();
  const account = await lockBillingAccount(tx.db, accountId, now);
  if (account.welcome_granted_at !== null || account.card_reference === null) return;
  const holder = await findRecipient(tx.db, accountId);
  if (holder === undefined || holder.email_verified_at === null) return;
  const amount = deps.config.billing.welcomeCreditMicros;
  await appendEntries(deps, tx, [{ account, entries: [{ kind: 'welcome_credit', amount }] }], now);
  await updateBillingAccount(tx.db, accountId, { welcome_granted_at: now, updated_at: now });
  await deps.jobs.enqueue(tx, welcomeCreditMailJob, [{ payload: { accountId, amount: formatMicros(amount) } }]);
}
