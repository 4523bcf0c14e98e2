import { AppError, notFound } from '../http/errors.ts';

export const runNotFound = () => notFound('The run');
export const scheduleNotFound = () => notFound('The schedule');
export const inboundWebhookNotFound = () => notFound('The inbound webhook');

export const invalidSignature = (detail: string) => new AppError(401, 'invalid_signature', detail);
