import { computeSignature } from './verify-webhook.js';

/** Spec 6.3 / CONTRACT 11: `t=<unix seconds>,v1=<hex>`, no spaces; computed afresh for each attempt. */
export function signatureHeader(secret: string, body: string, nowMs: number): string {
  const timestamp = Math.floor(nowMs / 1000);
  return `t=${timestamp},v1=${computeSignature(secret, timestamp, body)}`;
}

/** Spec 6.2: exactly these headers (plus the transport's own), signed at the moment of the attempt. */
export function deliveryHeaders(secret: string, body: string, eventType: string, deliveryId: string, nowMs: number): Record<string, string> {
  return {
    'content-type': 'application/json',
    'service-event': eventType,
    'service-delivery': deliveryId,
    'service-signature': signatureHeader(secret, body, nowMs),
  };
}
