import { createHmac, timingSafeEqual } from 'node:crypto';

/** Stripe's reference verifiers accept timestamps this far from now, either way. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

export type SignatureCheck = { ok: true } | { ok: false; problem: string };

/** `v1` of `Service-Signature`: lowercase hex HMAC-SHA256 of `<t>.<raw body>`, keyed with the UTF-8 bytes of the whole secret. */
export function signatureOf(secret: string, timestamp: number | string, body: Buffer): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.`).update(body).digest('hex');
}

/**
 * Checks `t=<unix>,v1=<hex>[,v1=<hex>…]` (several v1 values are allowed, as
 * during a secret rotation) against the raw body, in constant time per value.
 */
export function verifySignature(secret: string, header: string | undefined, body: Buffer, nowMs: number): SignatureCheck {
  if (header === undefined || header === '') return { ok: false, problem: 'The Service-Signature header is missing.' };
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.trim().split('=', 2);
    if (key === 't') timestamp = value;
    if (key === 'v1' && value !== undefined) signatures.push(value);
  }
  if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp) || signatures.length === 0) {
    return { ok: false, problem: 'The Service-Signature header must read t=<unix seconds>,v1=<hex>.' };
  }
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) {
    return { ok: false, problem: `The signature timestamp is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds away from now.` };
  }
  const expected = Buffer.from(signatureOf(secret, timestamp, body), 'utf8');
  const matches = signatures.some((signature) => {
    const given = Buffer.from(signature, 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? { ok: true } : { ok: false, problem: 'The signature does not match the body.' };
}
