import { AppError } from '../http/errors.ts';

export const emailTaken = () => new AppError(409, 'email_taken', 'An account with this email address already exists.');

export const invalidCredentials = () => new AppError(401, 'invalid_credentials', 'The email address or password is wrong.');

export const wrongCurrentPassword = () => new AppError(401, 'invalid_credentials', 'The current password is wrong.');

export const invalidEmailToken = () =>
  new AppError(400, 'invalid_token', 'This link is invalid, has already been used or has expired. Ask for a new one.');

export const invalidEmail = () => new AppError(400, 'invalid_request', 'email must be a valid email address.');

export const blankName = () => new AppError(400, 'invalid_request', 'name must not be blank.');

export const nameWithControlCharacters = () =>
  new AppError(400, 'invalid_request', 'name must not contain line breaks, control or text-direction characters.');

/**
 * More sign-ins, sign-ups and password changes than the hashing queue holds are
 * waiting: the whole service is busy, not this client over a limit (that would be 429).
 */
export const hashingBusy = (retryAfterSeconds: number) =>
  new AppError(503, 'service_unavailable', `Too many sign-ins are in progress. Try again in ${retryAfterSeconds} seconds.`, {
    'retry-after': String(retryAfterSeconds),
  });
