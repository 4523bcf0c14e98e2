/**
 * What billing asks of a card processor. A real processor (Stripe, Adyen)
 * implements the same three calls: the card's number and cvc go to it and
 * never further; billing keeps only the reference, brand, last4 and expiry.
 */
export interface CardInput {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

export interface SavedCard {
  /** The processor's handle for the card (a payment method id); charges name it. */
  reference: string;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

export type SaveResult = { ok: true; card: SavedCard } | { ok: false; reason: 'invalid'; detail: string } | { ok: false; reason: 'declined' };

export type ChargeResult = { ok: true; chargeId: string } | { ok: false; reason: 'declined' };

export interface PaymentProvider {
  readonly name: string;
  /** Whether cards are test cards (the dashboard says "test mode"). */
  readonly testMode: boolean;
  /** Checks and saves a card with the processor; `now` decides whether it has expired. */
  saveCard(card: CardInput, now: number): Promise<SaveResult>;
  /** Forgets a saved card at the processor. */
  removeCard(reference: string): Promise<void>;
  /**
   * Charges a saved card. `idempotencyKey` is the processor's own: the same
   * key charges once, however often it is sent (a retried top-up).
   */
  charge(reference: string, amountMicros: number, idempotencyKey: string): Promise<ChargeResult>;
}
