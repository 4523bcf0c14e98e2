import { AppError, conflict, notFound } from '../http/errors.ts';

export const runNotFound = () => notFound('The run');
export const scheduleNotFound = () => notFound('The schedule');
export const inboundWebhookNotFound = () => notFound('The inbound webhook');

/** RFC 9110 asks every 401 to name the scheme that would succeed: here, our signature header. */
export const invalidSignature = (detail: string) =>
  new AppError(401, 'invalid_signature', detail, { 'www-authenticate': 'Service-Signature realm="inbound-webhook", algorithm="hmac-sha256"' });

export const replayed = (runId: string | null) =>
  conflict(
    'replayed',
    `This signed request was already received${runId === null ? '' : ` (run ${runId})`}. Each request starts one run; sign a new one with the current time to start another.`,
  );
