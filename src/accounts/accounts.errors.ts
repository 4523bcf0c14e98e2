import { AppError } from '../http/errors.ts';

export const emailTaken = () => new AppError(409, 'email_taken', 'An account with this email address already exists.');

export const invalidCredentials = () => new AppError(401, 'invalid_credentials', 'The email address or password is wrong.');

export const wrongCurrentPassword = () => new AppError(401, 'invalid_credentials', 'The current password is wrong.');

export const invalidEmailToken = () =>
  new AppError(400, 'invalid_token', 'This link is invalid, has already been used or has expired. Ask for a new one.');

export const invalidEmail = () => new AppError(400, 'invalid_request', 'email must be a valid email address.');

export const blankName = () => new AppError(400, 'invalid_request', 'name must not be blank.');
