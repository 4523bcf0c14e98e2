// Where the account's money stands, and the one step that lets its machines
// run: shared by the Billing page, the banner, the getting-started checklist
// and the create-machine dialog, so they all say the same thing.
import { api } from './api.js';
import { usd } from './money.js';

/**
 * @typedef {object} Billing
 * @property {string} balance
 * @property {string} currency
 * @property {Record<string, string>} prices  USD per hour, by size
 * @property {Record<string, string>} [pausedPrices]  USD per hour of a paused machine, by size
 * @property {{ brand: string, last4: string, expMonth: number, expYear: number, createdAt: string } | null} paymentMethod
 * @property {{ amount: string, grantedAt: string | null, missing: string[] }} welcomeCredit
 */
/** @typedef {{ enabled: boolean, lowBalance: string, testMode: boolean }} BillingSettings */

/** @typedef {{ billing: Billing, settings: BillingSettings }} BillingStatus */

/** @type {((status: BillingStatus) => void) | null} */
let watcher = null;

/**
 * Who hears of every read of the balance: the banner of the page drawn (one
 * at a time, so a page left behind is forgotten). A card saved or a top-up on
 * the Billing page reads the balance again, and the banner then says what is
 * true now rather than what was true when the page was drawn.
 * @param {((status: BillingStatus) => void) | null} listener
 */
export function watchBilling(listener) {
  watcher = listener;
}

/** @returns {Promise<BillingStatus>} */
export async function loadBilling() {
  const [billing, settings] = await Promise.all([api('GET', '/api/billing'), api('GET', '/api/billing/settings')]);
  const status = { billing, settings };
  watcher?.(status);
  return status;
}

/** Zero or below: machines cannot be created or started. @param {string} amount */
export function isEmpty(amount) {
  return amount.startsWith('-') || Number(amount) === 0;
}

/**
 * What an account whose balance is empty does next, as the 402 says it; null
 * when machines can run (a balance, or billing off).
 * @param {Billing} billing
 * @param {BillingSettings} settings
 * @returns {{ text: string, href: string, label: string } | null}
 */
export function nextPaymentStep(billing, settings) {
  if (!settings.enabled || !isEmpty(billing.balance)) return null;
  const { amount, grantedAt, missing } = billing.welcomeCredit;
  const topUp = { text: 'Top up on the Billing page: machines run while the balance is above zero.', href: '/billing#card', label: 'Top up' };
  if (grantedAt !== null || Number(amount) === 0) return topUp;
  const credit = `your ${usd(amount)} welcome credit`;
  const email = missing.includes('email_confirmation');
  const card = missing.includes('payment_method');
  if (email && card) return { text: `Confirm your email address and add a card: ${credit} then arrives, and machines run from it.`, href: '/billing#card', label: 'Add a card' };
  if (card) return { text: `Add a card on the Billing page: ${credit} then arrives at once, and machines run from it.`, href: '/billing#card', label: 'Add a card' };
  if (email) return { text: `Confirm your email address (open the link in the mail we sent you): ${credit} then arrives at once.`, href: '/account', label: 'Resend the link' };
  return topUp;
}
