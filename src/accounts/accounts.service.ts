import type { Kysely } from 'kysely';
import { grantWelcomeCreditIfDue } from '../billing/welcome-credit.ts';
import type { DB } from '../db/database.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { inTransaction, type Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { announce } from '../db/signals.ts';
import { notFound } from '../http/errors.ts';
import { toIso } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { hashToken } from '../shared/secrets.ts';
import {
  blankName,
  emailTaken,
  invalidCredentials,
  invalidEmail,
  invalidEmailToken,
  nameWithControlCharacters,
  wrongCurrentPassword,
} from './accounts.errors.ts';
import {
  enforceResetLimit,
  enforceSignInLimits,
  enforceSignUpLimits,
  enforceVerificationMailLimit,
  enforceVerifyLimit,
} from './accounts.limits.ts';
import { confirmationMailJob, passwordNoticeJob, passwordResetMailJob } from './accounts.jobs.ts';
import { UNSAFE_NAME_CHARACTERS } from './accounts.mail.ts';
import {
  findAccountByEmail,
  findAccountById,
  insertAccount,
  markEmailVerified,
  publicAccount,
  updatePasswordHash,
  type Account,
  type AccountWithPassword,
} from './accounts.repository.ts';
import { consumeEmailToken, isEmailTokenUsable, retireEmailTokens } from './email-tokens.repository.ts';
import { dummyPasswordHash, hashPassword, needsRehash, verifyPassword } from './passwords.ts';
import { createSession, type ClientInfo } from './sessions.service.ts';
import { deleteSessionsOfAccount } from './sessions.repository.ts';
import { recordSecurityEvent } from '../security-log/security-log.ts';
import { hasTotp } from './second-factor.service.ts';
import { startSecondStep, type SecondFactorStep, type SignedIn } from './second-step.service.ts';

/**
 * RFC 5321's dot-atom local part, without quoted strings or comments: none of
 * `<>,;:"()[]\\`, whitespace or control characters, which would let a mail
 * library read the address as a list or a display name and mail someone else.
 */
const LOCAL_PART = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
/** A DNS label; letters of any script, for internationalised domains (nodemailer sends them as punycode). */
const DOMAIN_LABEL = /^[\p{L}\p{M}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$/u;
const EMAIL_MAX_LENGTH = 254;
const LOCAL_PART_MAX_LENGTH = 64;

export type { SignedIn } from './second-step.service.ts';

/** Trimmed and lower-cased: the form every lookup and limit uses. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** True for `local@domain.tld` within RFC 5321's lengths: what is stored is then exactly one mailbox. */
export function isDeliverableAddress(email: string): boolean {
  if (email.length > EMAIL_MAX_LENGTH) return false;
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const labels = email.slice(at + 1).split('.');
  return (
    at > 0 &&
    local.length <= LOCAL_PART_MAX_LENGTH &&
    LOCAL_PART.test(local) &&
    labels.length >= 2 &&
    labels.every((label) => DOMAIN_LABEL.test(label)) &&
    !/^\d+$/.test(labels.at(-1)!)
  );
}

/** @throws AppError 400 when the address cannot be one. */
function validEmail(email: string): string {
  const normalized = normalizeEmail(email);
  if (!isDeliverableAddress(normalized)) throw invalidEmail();
  return normalized;
}

/**
 * The name greets the person in every mail, so it must stay one line of plain text.
 * @throws AppError 400 when blank or carrying line breaks, control or text-direction characters.
 */
function validName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw blankName();
  if (UNSAFE_NAME_CHARACTERS.test(trimmed)) throw nameWithControlCharacters();
  return trimmed;
}

/**
 * Creates the account and its first session; its confirmation mail goes out as a job of the same transaction.
 * @throws AppError 400 invalid email or name, 409 email_taken, 429 rate_limited, 503 hashing queue full.
 */
export async function register(deps: Deps, input: { email: string; password: string; name: string }, client: ClientInfo): Promise<SignedIn> {
  const email = validEmail(input.email);
  const name = validName(input.name);
  await enforceSignUpLimits(deps, email, client.ip);
  if (await findAccountByEmail(deps.db, email)) throw emailTaken();
  const passwordHash = await hashPassword(input.password, deps.config.passwordHashCost);
  const now = deps.clock.now();
  try {
    return await inTransaction(deps.database, async (tx) => {
      const account = await insertAccount(tx.db, {
        id: newId('acct', now),
        email,
        name,
        password_hash: passwordHash,
        email_verified_at: null,
        created_at: now,
        updated_at: now,
      });
      await deps.jobs.enqueue(tx, confirmationMailJob, [{ payload: { accountId: account.id } }]);
      const session = await createSession(tx.db, account.id, client, now);
      await recordSecurityEvent(tx.db, { accountId: account.id, type: 'sign_in', at: now, origin: client, detail: { method: 'registration' } });
      return { account: publicAccount(account), sessionToken: session.token };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

/**
 * An unknown email is checked against a dummy hash, so it takes as long as a wrong password.
 * With an authenticator app on, a right password opens a pending sign-in
 * (the second step) instead of a session: a passkey alone adds no step.
 * @throws AppError 401 invalid_credentials (one answer for both cases), 429 rate_limited.
 */
export async function signIn(deps: Deps, input: { email: string; password: string }, client: ClientInfo): Promise<SignedIn | SecondFactorStep> {
  const email = normalizeEmail(input.email);
  await enforceSignInLimits(deps, email, client.ip);
  const { db, config, clock } = deps;
  const account = await findAccountByEmail(db, email);
  const matches = await verifyPassword(input.password, account?.passwordHash ?? (await dummyPasswordHash(config.passwordHashCost)));
  if (account !== undefined && !matches) {
    await recordSecurityEvent(db, { accountId: account.id, type: 'sign_in_failed', at: clock.now(), origin: client, detail: { step: 'password' } });
  }
  if (account === undefined || !matches) throw invalidCredentials();
  const now = clock.now();
  if (needsRehash(account.passwordHash, config.passwordHashCost)) {
    await updatePasswordHash(db, account.id, await hashPassword(input.password, config.passwordHashCost), now);
  }
  if (await hasTotp(db, account.id)) return startSecondStep(db, account.id, now);
  const session = await inTransaction(deps.database, async (tx) => {
    await recordSecurityEvent(tx.db, { accountId: account.id, type: 'sign_in', at: now, origin: client, detail: { method: 'password' } });
    return createSession(tx.db, account.id, client, now);
  });
  return { account: publicAccount(account), sessionToken: session.token };
}

/** @throws AppError 400 invalid_token when the link is unknown, used or expired, 429 beyond the per-IP limit. */
export async function confirmEmail(deps: Deps, token: string, { ip, userAgent }: ClientInfo): Promise<void> {
  await enforceVerifyLimit(deps, ip);
  const now = deps.clock.now();
  const confirmed = await inTransaction(deps.database, async (tx) => {
    const accountId = await consumeEmailToken(tx.db, hashToken(token), 'verify_email', now);
    if (accountId !== undefined) {
      const verified = await markEmailVerified(tx.db, accountId, now);
      await grantWelcomeCreditIfDue(deps, tx, accountId);
      await announce(deps.signals, tx, `account:${accountId}`);
      if (verified) await recordSecurityEvent(tx.db, { accountId, type: 'email_verified', at: now, origin: { ip, userAgent } });
    }
    return accountId !== undefined;
  });
  if (!confirmed) throw invalidEmailToken();
}

/**
 * Mails a new confirmation link (a job); nothing when the address is already confirmed.
 * @throws AppError 429 beyond the mail limit.
 */
export async function requestEmailConfirmation(deps: Deps, accountId: string): Promise<void> {
  const account = await getAccount(deps.db, accountId);
  if (account.emailVerified) return;
  await enforceVerificationMailLimit(deps, account.email);
  await inTransaction(deps.database, (tx) => deps.jobs.enqueue(tx, confirmationMailJob, [{ payload: { accountId: account.id } }]));
}

/**
 * The whole of `forgot` in the request: one job, the same for every address,
 * so neither the answer nor its timing says whether an account exists. The
 * job decides (unknown addresses and addresses over the mail limit get nothing).
 */
export async function requestPasswordReset(deps: Deps, rawEmail: string, ip: string): Promise<void> {
  const email = normalizeEmail(rawEmail);
  await inTransaction(deps.database, (tx) => deps.jobs.enqueue(tx, passwordResetMailJob, [{ payload: { email, ip } }]));
}

/** The security notice mailed after a change to what protects an account, as a job of the change's own transaction. */
function sendPasswordNotice(deps: Deps, tx: Tx, accountId: string, how: 'changed' | 'reset', now: number): Promise<void> {
  return deps.jobs.enqueue(tx, passwordNoticeJob, [{ payload: { accountId, how, at: toIso(now) } }]);
}

/**
 * Sets the new password, signs out every session, signs the caller in and
 * sends the security notice. The link proves the mailbox, so the address counts as confirmed too.
 * It does not prove the second factor: with an authenticator app on, the
 * caller gets the second step of a sign-in instead of a session.
 * @throws AppError 400 invalid_token, 429 beyond the per-IP limit, 503 hashing queue full.
 */
export async function resetPassword(deps: Deps, input: { token: string; password: string }, client: ClientInfo): Promise<SignedIn | SecondFactorStep> {
  await enforceResetLimit(deps, client.ip);
  const tokenHash = hashToken(input.token);
  // A read first: a bad link must not cost a password hash. The consume below stays the atomic check.
  if (!(await isEmailTokenUsable(deps.db, tokenHash, 'reset_password', deps.clock.now()))) throw invalidEmailToken();
  const passwordHash = await hashPassword(input.password, deps.config.passwordHashCost);
  const now = deps.clock.now();
  const result = await inTransaction(deps.database, async (tx): Promise<SignedIn | SecondFactorStep | null> => {
    const trx = tx.db;
    const accountId = await consumeEmailToken(trx, tokenHash, 'reset_password', now);
    if (accountId === undefined) return null;
    await updatePasswordHash(trx, accountId, passwordHash, now);
    if (await markEmailVerified(trx, accountId, now)) await recordSecurityEvent(trx, { accountId, type: 'email_verified', at: now, origin: client });
    await grantWelcomeCreditIfDue(deps, tx, accountId);
    await announce(deps.signals, tx, `account:${accountId}`);
    await retireEmailTokens(trx, accountId, 'reset_password', now);
    await deleteSessionsOfAccount(trx, accountId);
    await sendPasswordNotice(deps, tx, accountId, 'reset', now);
    await recordSecurityEvent(trx, { accountId, type: 'password_reset', at: now, origin: client });
    if (await hasTotp(trx, accountId)) return startSecondStep(trx, accountId, now);
    const session = await createSession(trx, accountId, client, now);
    await recordSecurityEvent(trx, { accountId, type: 'sign_in', at: now, origin: client, detail: { method: 'password_reset' } });
    const account = await findAccountById(trx, accountId);
    return { account: publicAccount(account!), sessionToken: session.token };
  });
  if (result === null) throw invalidEmailToken();
  return result;
}

/**
 * Changes the password of a signed-in account, signs out every other session and sends the security notice.
 * @throws AppError 401 when the current password is wrong, 429 beyond the sign-in limit, 503 hashing queue full.
 */
export async function changePassword(
  deps: Deps,
  accountId: string,
  currentSessionId: string,
  input: { currentPassword: string; newPassword: string },
  client: ClientInfo,
): Promise<Account> {
  const { ip } = client;
  const { db, config, clock } = deps;
  const account = await getAccount(db, accountId);
  await enforceSignInLimits(deps, account.email, ip);
  if (!(await verifyPassword(input.currentPassword, account.passwordHash))) throw wrongCurrentPassword();
  const passwordHash = await hashPassword(input.newPassword, config.passwordHashCost);
  const now = clock.now();
  await inTransaction(deps.database, async (tx) => {
    await updatePasswordHash(tx.db, accountId, passwordHash, now);
    await retireEmailTokens(tx.db, accountId, 'reset_password', now);
    await deleteSessionsOfAccount(tx.db, accountId, currentSessionId);
    await sendPasswordNotice(deps, tx, accountId, 'changed', now);
    await recordSecurityEvent(tx.db, { accountId, type: 'password_changed', at: now, origin: client });
  });
  return publicAccount(account);
}

/** @throws AppError 404 (the account was deleted under a live credential). */
export async function accountView(db: Kysely<DB>, accountId: string): Promise<Account> {
  return publicAccount(await getAccount(db, accountId));
}

/** @throws AppError 404 (the account was deleted under a live credential). */
export async function getAccount(db: Kysely<DB>, accountId: string): Promise<AccountWithPassword> {
  const account = await findAccountById(db, accountId);
  if (account === undefined) throw notFound('The account');
  return account;
}
