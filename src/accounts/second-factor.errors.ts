import { AppError, conflict } from '../http/errors.ts';

export const invalidCode = () =>
  new AppError(401, 'invalid_code', 'The code is wrong, was already used or has expired. Enter the code your authenticator app shows now, or an unused recovery code.');

export const invalidPasskey = (detail = 'The passkey was not accepted. Ask for new options and try again.') => new AppError(401, 'invalid_passkey', detail);

export const signInExpired = () => new AppError(401, 'sign_in_expired', 'This sign-in has expired (it lasts 5 minutes) or was never started. Sign in again with your password.');

export const totpAlreadyOn = () => conflict('conflict', 'An authenticator app is already set up. Turn it off first to set up another.');

export const noPendingTotp = () => conflict('conflict', 'No authenticator app is waiting to be confirmed: start with POST /api/me/totp.');

export const totpOff = () => conflict('conflict', 'Two-factor authentication with an authenticator app is not on for this account.');
