// Types for verify-webhook.js, for receivers written in TypeScript.

export class WebhookVerificationError extends Error {
  constructor(message: string);
}

export interface WebhookEvent {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

/** Lowercase hex HMAC-SHA256, keyed with the whole secret, of `<timestamp>.<raw body>`. */
export function computeSignature(secret: string, timestamp: number | string, rawBody: string | Uint8Array): string;

/**
 * Checks `Service-Signature` against the raw body in constant time and returns the parsed event.
 * @throws WebhookVerificationError when anything about the request is off; TypeError when called wrongly.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  signatureHeader: string | null | undefined,
  secret: string | readonly string[],
  options?: { toleranceSeconds?: number; now?: number },
): WebhookEvent;
