import { computeSignature, verifyWebhook, WebhookVerificationError } from '../event-webhooks/verify-webhook.js';

/** Stripe's reference verifiers accept timestamps this far from now, either way. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

export type SignatureCheck =
  | {
      ok: true;
      /** The `v1` value that matched: it depends only on the timestamp and the body, so it names the request (the replay guard's key). */
      signature: string;
      /** The signed unix seconds: the request can be replayed until this plus the tolerance. */
      timestamp: number;
    }
  | { ok: false; problem: string };

/**
 * verifyWebhook (the verifier we give customers for our own deliveries) parses
 * the body as an event once the signature holds; an inbound webhook's body is
 * anything, so that one complaint means the signature was good.
 */
const NOT_AN_EVENT = 'body is not JSON';

const PROBLEMS: Record<string, string> = {
  'missing signature header': 'The Service-Signature header is missing.',
  'signature header has no valid timestamp': 'The Service-Signature header must read t=<unix seconds>,v1=<hex>.',
  'signature header has no v1 signature': 'The Service-Signature header must read t=<unix seconds>,v1=<hex>.',
  'timestamp outside the tolerance': `The signature timestamp is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds away from now.`,
  'no signature matches': 'The signature does not match the body.',
};

/**
 * Checks an inbound webhook's `Service-Signature` (`t=<unix>,v1=<hex>[,v1=…]`,
 * signed like our outgoing deliveries) against the raw body, with the shared
 * verifier; then names the request by the signature that matched.
 */
export function verifyInboundSignature(secret: string, header: string | undefined, body: Buffer, nowMs: number): SignatureCheck {
  try {
    verifyWebhook(body, header, secret, { toleranceSeconds: SIGNATURE_TOLERANCE_SECONDS, now: Math.floor(nowMs / 1000) });
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error;
    if (error.message !== NOT_AN_EVENT) return { ok: false, problem: PROBLEMS[error.message] ?? 'The signature is not valid.' };
  }
  // verifyWebhook held, so the header has a timestamp; read it the way verifyWebhook does (the last valid `t`).
  const fields = header!.split(',').map((part) => {
    const separator = part.indexOf('=');
    return [part.slice(0, separator).trim(), part.slice(separator + 1).trim()] as const;
  });
  const timestamp = Number(fields.filter(([key, value]) => key === 't' && /^\d+$/.test(value)).at(-1)![1]);
  const signature = computeSignature(secret, timestamp, body);
  // Were the two readings of the header ever to differ, the key would not be the signature that matched: refuse rather than guard the wrong key.
  if (!fields.some(([key, value]) => key === 'v1' && value === signature)) return { ok: false, problem: 'The signature does not match the body.' };
  return { ok: true, signature, timestamp };
}
