import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { inTransaction } from '../db/transaction.ts';
import { announce } from '../shared/signals.ts';
import { notFound } from '../http/errors.ts';
import { DAY, HOUR, toIso } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { blankName, emailTaken, invalidCredentials, invalidEmail, invalidEmailToken, wrongCurrentPassword } from './accounts.errors.ts';
import { enforceSignInLimits, enforceSignUpLimits, enforceVerificationMailLimit, resetMailAllowed } from './accounts.limits.ts';
import { passwordChangedMail, passwordResetMail, verificationMail } from './accounts.mail.ts';
import {
  findAccountByEmail,
  findAccountById,
  insertAccount,
  markEmailVerified,
  publicAccount,
  updatePasswordHash,
  type Account,
} from './accounts.repository.ts';
import type { EmailTokenPurpose } from './accounts.tables.ts';
import { consumeEmailToken, insertEmailToken, retireEmailTokens } from './email-tokens.repository.ts';
import { dummyPasswordHash, hashPassword, needsRehash, verifyPassword } from './passwords.ts';
import { createSession, type ClientInfo } from './sessions.service.ts';
import { deleteSessionsOfAccount } from './sessions.repository.ts';

const TOKEN_LIFETIME: Record<EmailTokenPurpose, number> = { verify_email: DAY, reset_password: HOUR };
const EMAIL_SHAPE = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
const EMAIL_MAX_LENGTH = 254;

export interface SignedIn {
  account: Account;
  sessionToken: string;
}

/** Trimmed and lower-cased: the form every lookup and limit uses. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** @throws AppError 400 when the address cannot be one. */
function validEmail(email: string): string {
  const normalized = normalizeEmail(email);
  if (normalized.length > EMAIL_MAX_LENGTH || !EMAIL_SHAPE.test(normalized)) throw invalidEmail();
  return normalized;
}

async function issueEmailToken(db: Kysely<DB>, accountId: string, purpose: EmailTokenPurpose, now: number): Promise<string> {
  const token = generateOpaqueToken();
  await insertEmailToken(db, { tokenHash: hashToken(token), accountId, purpose, expiresAt: now + TOKEN_LIFETIME[purpose], now });
  return token;
}

/**
 * Creates the account and its first session; the confirmation mail is the caller's to send after responding.
 * @throws AppError 400 invalid email or blank name, 409 email_taken, 429 rate_limited.
 */
export async function register(
  deps: Deps,
  input: { email: string; password: string; name: string },
  client: ClientInfo,
): Promise<SignedIn & { verificationToken: string }> {
  const email = validEmail(input.email);
  const name = input.name.trim();
  if (name === '') throw blankName();
  await enforceSignUpLimits(deps, email, client.ip);
  if (await findAccountByEmail(deps.db, email)) throw emailTaken();
  const passwordHash = await hashPassword(input.password, deps.config.passwordHashCost);
  const now = deps.clock.now();
  try {
    return await inTransaction(deps.db, async ({ db: trx }) => {
      const account = await insertAccount(trx, {
        id: newId('acct', now),
        email,
        name,
        password_hash: passwordHash,
        email_verified_at: null,
        created_at: now,
        updated_at: now,
      });
      const verificationToken = await issueEmailToken(trx, account.id, 'verify_email', now);
      const session = await createSession(trx, account.id, client, now);
      return { account: publicAccount(account), sessionToken: session.token, verificationToken };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

/**
 * An unknown email is checked against a dummy hash, so it takes as long as a wrong password.
 * @throws AppError 401 invalid_credentials (one answer for both cases), 429 rate_limited.
 */
export async function signIn(deps: Deps, input: { email: string; password: string }, client: ClientInfo): Promise<SignedIn> {
  const email = normalizeEmail(input.email);
  await enforceSignInLimits(deps, email, client.ip);
  const { db, config, clock } = deps;
  const account = await findAccountByEmail(db, email);
  const matches = await verifyPassword(input.password, account?.passwordHash ?? (await dummyPasswordHash(config.passwordHashCost)));
  if (account === undefined || !matches) throw invalidCredentials();
  const now = clock.now();
  if (needsRehash(account.passwordHash, config.passwordHashCost)) {
    await updatePasswordHash(db, account.id, await hashPassword(input.password, config.passwordHashCost), now);
  }
  const session = await createSession(db, account.id, client, now);
  return { account: publicAccount(account), sessionToken: session.token };
}

/** @throws AppError 400 invalid_token when the link is unknown, used or expired. */
export async function confirmEmail(deps: Deps, token: string): Promise<void> {
  const now = deps.clock.now();
  const confirmed = await inTransaction(deps.db, async (tx) => {
    const accountId = await consumeEmailToken(tx.db, hashToken(token), 'verify_email', now);
    if (accountId !== undefined) {
      await markEmailVerified(tx.db, accountId, now);
      await announce(deps.signals, tx, `account:${accountId}`);
    }
    return accountId !== undefined;
  });
  if (!confirmed) throw invalidEmailToken();
}

/**
 * Issues a new confirmation link; null when the address is already confirmed.
 * @throws AppError 429 beyond the mail limit.
 */
export async function requestEmailConfirmation(deps: Deps, accountId: string): Promise<{ account: Account; token: string } | null> {
  const account = await getAccount(deps.db, accountId);
  if (account.emailVerified) return null;
  await enforceVerificationMailLimit(deps, account.email);
  const token = await issueEmailToken(deps.db, account.id, 'verify_email', deps.clock.now());
  return { account: publicAccount(account), token };
}

export function sendEmailConfirmation(deps: Deps, account: Account, token: string): Promise<void> {
  return deps.mailer.send(verificationMail(deps.config.publicUrl, account, token));
}

/**
 * The whole of `forgot`, run after the response: nothing here can show in the
 * answer or its timing. Unknown addresses and addresses over the mail limit get nothing.
 */
export async function sendPasswordReset(deps: Deps, rawEmail: string, ip: string): Promise<void> {
  const email = normalizeEmail(rawEmail);
  if (!(await resetMailAllowed(deps, email, ip))) return;
  const account = await findAccountByEmail(deps.db, email);
  if (account === undefined) return;
  const token = await issueEmailToken(deps.db, account.id, 'reset_password', deps.clock.now());
  await deps.mailer.send(passwordResetMail(deps.config.publicUrl, account, token));
}

/**
 * Sets the new password, signs out every session and signs the caller in. The
 * link proves the mailbox, so the address counts as confirmed too.
 * @throws AppError 400 invalid_token.
 */
export async function resetPassword(deps: Deps, input: { token: string; password: string }, client: ClientInfo): Promise<SignedIn> {
  const passwordHash = await hashPassword(input.password, deps.config.passwordHashCost);
  const now = deps.clock.now();
  const result = await inTransaction(deps.db, async (tx) => {
    const trx = tx.db;
    const accountId = await consumeEmailToken(trx, hashToken(input.token), 'reset_password', now);
    if (accountId === undefined) return null;
    await updatePasswordHash(trx, accountId, passwordHash, now);
    await markEmailVerified(trx, accountId, now);
    await announce(deps.signals, tx, `account:${accountId}`);
    await retireEmailTokens(trx, accountId, 'reset_password', now);
    await deleteSessionsOfAccount(trx, accountId);
    const session = await createSession(trx, accountId, client, now);
    const account = await findAccountById(trx, accountId);
    return { account: publicAccount(account!), sessionToken: session.token };
  });
  if (result === null) throw invalidEmailToken();
  return result;
}

/**
 * Changes the password of a signed-in account and signs out every other session.
 * @throws AppError 401 when the current password is wrong, 429 beyond the sign-in limit.
 */
export async function changePassword(
  deps: Deps,
  accountId: string,
  currentSessionId: string,
  input: { currentPassword: string; newPassword: string },
  ip: string,
): Promise<Account> {
  const { db, config, clock } = deps;
  const account = await getAccount(db, accountId);
  await enforceSignInLimits(deps, account.email, ip);
  if (!(await verifyPassword(input.currentPassword, account.passwordHash))) throw wrongCurrentPassword();
  const passwordHash = await hashPassword(input.newPassword, config.passwordHashCost);
  const now = clock.now();
  await inTransaction(db, async ({ db: trx }) => {
    await updatePasswordHash(trx, accountId, passwordHash, now);
    await retireEmailTokens(trx, accountId, 'reset_password', now);
    await deleteSessionsOfAccount(trx, accountId, currentSessionId);
  });
  return publicAccount(account);
}

export function sendPasswordChangedNotice(deps: Deps, account: Account, how: 'changed' | 'reset'): Promise<void> {
  return deps.mailer.send(passwordChangedMail(deps.config.publicUrl, account, how, toIso(deps.clock.now())));
}

/** @throws AppError 404 (the account was deleted under a live credential). */
export async function getAccount(db: Kysely<DB>, accountId: string) {
  const account = await findAccountById(db, accountId);
  if (account === undefined) throw notFound('The account');
  return account;
}
