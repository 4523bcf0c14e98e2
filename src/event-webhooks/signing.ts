import { computeSignature } from './verify-webhook.js';

/** `t=<unix seconds>,v1=<hex>`, no spaces; computed afresh for each attempt. */
export function signatureHeader(secret: string, body: string, nowMs: number): string {
  const timestamp = Math.floor(nowMs / 1000);
  return `t=${timestamp},v1=${computeSignature(secret, timestamp, body)}`;
}

/** Exactly these headers (plus the transport's own), signed at the moment of the attempt. */
export function deliveryHeaders(secret: string, body: string, eventType: string, deliveryId: string, nowMs: number): Record<string, string> {
  return {
    'content-type': 'application/json',
    'service-event': eventType,
    'service-delivery': deliveryId,
    'service-signature': signatureHeader(secret, body, nowMs),
  };
}
