// The receiver's side of our signatures, for customers: plain JavaScript (Node
// does not strip types inside node_modules), no dependencies.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class WebhookVerificationError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/**
 * Lowercase hex HMAC-SHA256, keyed with the UTF-8 bytes of the whole secret
 * (`whsec_…` included), of `<timestamp>.<raw body>`.
 * @param {string} secret
 * @param {number | string} timestamp unix seconds, as written in the header
 * @param {string | Uint8Array} rawBody
 * @returns {string}
 */
export function computeSignature(secret, timestamp, rawBody) {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/**
 * Checks a delivery's `Service-Signature` header (`t=<unix seconds>,v1=<hex>`)
 * against the raw request body, in constant time, and refuses timestamps more
 * than `toleranceSeconds` away from now. Several `v1` values and several
 * secrets (during a rotation on your side) are accepted.
 * @param {string | Uint8Array} rawBody the body exactly as received, before any JSON parsing
 * @param {string | null | undefined} signatureHeader
 * @param {string | readonly string[]} secret
 * @param {{ toleranceSeconds?: number, now?: number }} [options] `now` in unix seconds
 * @returns {{ id: string, type: string, createdAt: string, data: Record<string, unknown> }} the parsed event
 * @throws {WebhookVerificationError} when the header is missing or malformed, the timestamp is outside the tolerance, no signature matches, or the body is not a JSON object
 * @throws {TypeError} when called wrongly (a parsed body, no secret, a tolerance that is not a number): it fails closed
 */
export function verifyWebhook(rawBody, signatureHeader, secret, options = {}) {
  const toleranceSeconds = options.toleranceSeconds ?? 300;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (typeof toleranceSeconds !== 'number' || !Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) {
    throw new TypeError('toleranceSeconds must be a finite number of seconds, 0 or more');
  }
  if (typeof now !== 'number' || !Number.isFinite(now)) throw new TypeError('now must be a finite number of unix seconds');
  if (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array)) {
    throw new TypeError('rawBody must be the body as received (a string or a Buffer), not parsed JSON');
  }
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(secrets) || secrets.length === 0 || !secrets.every((candidate) => typeof candidate === 'string' && candidate !== '')) {
    throw new TypeError('secret must be the endpoint secret (whsec_…) or a non-empty list of them');
  }
  if (typeof signatureHeader !== 'string' || signatureHeader === '') throw new WebhookVerificationError('missing signature header');

  /** @type {string | undefined} */
  let timestamp;
  /** @type {string[]} */
  const signatures = [];
  for (const part of signatureHeader.split(',')) {
    const separator = part.indexOf('=');
    const key = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (key === 't' && timestamp === undefined && /^\d{1,15}$/.test(value)) timestamp = value;
    if (key === 'v1' && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === undefined) throw new WebhookVerificationError('signature header has no valid timestamp');
  if (signatures.length === 0) throw new WebhookVerificationError('signature header has no v1 signature');
  if (Math.abs(now - Number(timestamp)) > toleranceSeconds) throw new WebhookVerificationError('timestamp outside the tolerance');

  const matches = secrets.some((candidate) => {
    const expected = Buffer.from(computeSignature(candidate, timestamp, rawBody), 'hex');
    return signatures.some((signature) => timingSafeEqual(expected, Buffer.from(signature, 'hex')));
  });
  if (!matches) throw new WebhookVerificationError('no signature matches');

  const text = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8');
  let event;
  try {
    event = JSON.parse(text);
  } catch {
    throw new WebhookVerificationError('body is not JSON');
  }
  if (event === null || typeof event !== 'object' || Array.isArray(event)) throw new WebhookVerificationError('body is not a JSON object');
  return event;
}
