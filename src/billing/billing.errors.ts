import { AppError, invalidRequest } from '../http/errors.ts';

export const cardDeclined = () => new AppError(402, 'card_declined', 'The card was declined. Nothing was saved or charged; try another card.');

export const paymentMethodRequired = () => new AppError(409, 'payment_method_required', 'Add a card first (PUT /api/billing/payment-method), then top up.');

export const invalidCard = (detail: string) => invalidRequest(detail);

export const amountOutOfRange = () => invalidRequest('amount must be a decimal string from "5.00" to "1000.00", with at most six decimals.');

export const idempotencyKeyReused = () => invalidRequest('This Idempotency-Key was used with another amount. Use a new key for a new top-up.');

export const badIdempotencyKey = () => invalidRequest('The Idempotency-Key header must be 1 to 255 characters.');
