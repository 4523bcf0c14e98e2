import { createHash, randomBytes } from 'node:crypto';
import type { CardInput, ChargeResult, PaymentProvider, SaveResult } from './payment-provider.ts';

/** The test cards, as a processor's test mode knows them. */
const REFUSED = '4000000000000002';
const CHARGES_DECLINED = '4000000000009995';

export function luhnValid(number: string): boolean {
  let sum = 0;
  for (let i = 0; i < number.length; i++) {
    let digit = number.charCodeAt(number.length - 1 - i) - 48;
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

function brandOf(number: string): string {
  if (number.startsWith('4')) return 'visa';
  if (/^(5[1-5]|2[2-7])/.test(number)) return 'mastercard';
  if (/^3[47]/.test(number)) return 'amex';
  return 'unknown';
}

/**
 * The `simulated` payment provider: a card processor's test mode, in process.
 * Its card reference says how the card behaves (as a test-mode processor's
 * would), and carries a hash of nothing secret: no digit of the number beyond
 * the last four is kept anywhere.
 */
export function createSimulatedPaymentProvider(): PaymentProvider {
  return {
    name: 'simulated',
    testMode: true,
    async saveCard(card: CardInput, now: number): Promise<SaveResult> {
      if (!/^\d{12,19}$/.test(card.number) || !luhnValid(card.number)) return { ok: false, reason: 'invalid', detail: 'The card number is not valid.' };
      if (!/^\d{3,4}$/.test(card.cvc)) return { ok: false, reason: 'invalid', detail: 'The cvc must be 3 or 4 digits.' };
      const today = new Date(now);
      const expired = card.expYear < today.getUTCFullYear() || (card.expYear === today.getUTCFullYear() && card.expMonth < today.getUTCMonth() + 1);
      if (expired) return { ok: false, reason: 'invalid', detail: 'The card has expired.' };
      if (card.number === REFUSED) return { ok: false, reason: 'declined' };
      const behaviour = card.number === CHARGES_DECLINED ? 'decline' : 'ok';
      const nonce = randomBytes(8).toString('hex');
      return {
        ok: true,
        card: { reference: `pm_sim_${behaviour}_${nonce}`, brand: brandOf(card.number), last4: card.number.slice(-4), expMonth: card.expMonth, expYear: card.expYear },
      };
    },
    async removeCard() {},
    async charge(reference: string, _amountMicros: number, idempotencyKey: string): Promise<ChargeResult> {
      if (reference.startsWith('pm_sim_decline_')) return { ok: false, reason: 'declined' };
      return { ok: true, chargeId: `ch_sim_${createHash('sha256').update(idempotencyKey).digest('hex').slice(0, 24)}` };
    },
  };
}
