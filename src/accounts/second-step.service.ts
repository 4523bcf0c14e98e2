import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import type { DB } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { recordSecurityEvent, type RequestOrigin } from '../security-log/security-log.ts';
import { MINUTE } from '../shared/clock.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { enforcePasskeySignInLimit, enforceSignInLimits } from './accounts.limits.ts';
import { findAccountById, publicAccount, type Account } from './accounts.repository.ts';
import { listPasskeyRows, recordPasskeyUse } from './passkeys.repository.ts';
import { sealChallenge, openChallenge } from './challenge-cookie.ts';
import { boundAuthenticationOptions, CHALLENGE_LIFETIME_MS, passkeyAuthenticationOptions, verifyBoundAssertion, verifyPasskeyAssertion } from './passkeys.service.ts';
import { spendChallenge } from './signing-keys.repository.ts';
import { invalidCode, invalidPasskey, signInExpired } from './second-factor.errors.ts';
import { deletePendingSignIn, findPendingSignIn, insertPendingSignIn } from './second-factor.repository.ts';
import { useSecondFactorCode } from './second-factor.service.ts';
import { createSession } from './sessions.service.ts';

/** The password step is remembered this long, in this browser only. */
export const PENDING_SIGN_IN_MS = 5 * MINUTE;

export type SecondFactorMethod = 'totp' | 'recovery' | 'passkey';

/** What `login` (and `reset`) answer when a second step is needed: no session yet, a pending cookie instead. */
export interface SecondFactorStep {
  secondFactor: { required: true; methods: SecondFactorMethod[] };
  pendingToken: string;
}

export interface SignedIn {
  account: Account;
  sessionToken: string;
}

/** The password was right and the account has a second factor: a pending sign-in, bound to the browser by its cookie. */
export async function startSecondStep(db: Kysely<DB>, accountId: string, now: number): Promise<SecondFactorStep> {
  const pendingToken = generateOpaqueToken();
  await insertPendingSignIn(db, { tokenHash: hashToken(pendingToken), accountId, now, expiresAt: now + PENDING_SIGN_IN_MS });
  const passkeys = await listPasskeyRows(db, accountId);
  const methods: SecondFactorMethod[] = passkeys.length > 0 ? ['totp', 'recovery', 'passkey'] : ['totp', 'recovery'];
  return { secondFactor: { required: true, methods }, pendingToken };
}

/** The binding of the second step's passkey challenge: the pending sign-in itself. */
const secondStepBinding = (pendingToken: string) => `second-factor:${hashToken(pendingToken)}`;

/** @throws AppError 401 sign_in_expired */
async function pendingAccount(deps: Deps, pendingToken: string | undefined) {
  const accountId = pendingToken === undefined ? undefined : await findPendingSignIn(deps.db, hashToken(pendingToken), deps.clock.now());
  const account = accountId === undefined ? undefined : await findAccountById(deps.db, accountId);
  if (account === undefined) throw signInExpired();
  return account;
}

/**
 * Passkey options for the second step: the account's own passkeys, the challenge bound to the pending sign-in.
 * @throws AppError 401 sign_in_expired
 */
export async function secondStepPasskeyOptions(deps: Deps, pendingToken: string | undefined) {
  const account = await pendingAccount(deps, pendingToken);
  return boundAuthenticationOptions(deps, secondStepBinding(pendingToken!), account.id);
}

/**
 * Completes a pending sign-in with a TOTP or recovery code, or a passkey.
 * Every attempt counts in the account's sign-in rate limit; a failure is logged.
 * @throws AppError 401 sign_in_expired, invalid_code, invalid_passkey; 429.
 */
export async function completeSecondStep(
  deps: Deps,
  pendingToken: string | undefined,
  input: { code?: string | undefined; passkey?: AuthenticationResponseJSON | undefined },
  origin: RequestOrigin,
): Promise<SignedIn> {
  const account = await pendingAccount(deps, pendingToken);
  const tokenHash = hashToken(pendingToken!);
  await enforceSignInLimits(deps, account.email, origin.ip);
  let method: string;
  try {
    if (input.passkey !== undefined) {
      await verifyBoundAssertion(deps, secondStepBinding(pendingToken!), input.passkey, { accountId: account.id, userVerification: false });
      method = 'password+passkey';
    } else {
      const used = await useSecondFactorCode(deps, account.id, input.code ?? '', origin);
      if (used === null) throw invalidCode();
      method = used === 'totp' ? 'password+totp' : 'password+recovery_code';
    }
  } catch (error) {
    await recordSecurityEvent(deps.db, { accountId: account.id, type: 'sign_in_failed', at: deps.clock.now(), origin, detail: { step: 'second_factor' } });
    throw error;
  }
  const now = deps.clock.now();
  const session = await inTransaction(deps.database, async (tx) => {
    if (!(await deletePendingSignIn(tx.db, tokenHash))) return null;
    await recordSecurityEvent(tx.db, { accountId: account.id, type: 'sign_in', at: now, origin, detail: { method } });
    return createSession(tx.db, account.id, origin, now);
  });
  if (session === null) throw signInExpired();
  return { account: publicAccount(account), sessionToken: session.token };
}

/**
 * Options for a passwordless sign-in. Nothing is stored: the challenge goes
 * back sealed in the browser's cookie (challenge-cookie.ts), since anyone may
 * ask for options as often as they like.
 */
export async function passkeySignInOptions(deps: Deps) {
  const options = await passkeyAuthenticationOptions(deps);
  const now = deps.clock.now();
  const browserToken = await sealChallenge(deps.db, options.challenge, now + CHALLENGE_LIFETIME_MS, now);
  return { options, browserToken };
}

/**
 * Signs in with a discoverable passkey alone (user verification required): no
 * password, no second step. The challenge is spent in the transaction of the
 * session, so the same answer (or cookie) never signs in twice.
 * @throws AppError 401 invalid_passkey (no, forged or altered cookie, answer refused or used already), sign_in_expired (cookie expired); 429.
 */
export async function signInWithPasskey(deps: Deps, browserToken: string | undefined, response: AuthenticationResponseJSON, origin: RequestOrigin): Promise<SignedIn> {
  await enforcePasskeySignInLimit(deps, origin.ip);
  if (browserToken === undefined) throw invalidPasskey();
  const { challenge, expiresAt } = await openChallenge(deps.db, browserToken, deps.clock.now());
  const { accountId, passkeyId, newCounter } = await verifyPasskeyAssertion(deps, challenge, response, { userVerification: true });
  const account = await findAccountById(deps.db, accountId);
  if (account === undefined) throw invalidPasskey();
  const now = deps.clock.now();
  const session = await inTransaction(deps.database, async (tx) => {
    if (!(await spendChallenge(tx.db, hashToken(challenge), expiresAt))) return null;
    await recordPasskeyUse(tx.db, passkeyId, newCounter, now);
    await recordSecurityEvent(tx.db, { accountId, type: 'sign_in', at: now, origin, detail: { method: 'passkey', passkeyId } });
    return createSession(tx.db, accountId, origin, now);
  });
  if (session === null) throw invalidPasskey('This passkey answer was used already: ask for new options and try again.');
  return { account: publicAccount(account), sessionToken: session.token };
}

function cookieOptions(config: Pick<Config, 'secureCookies'>) {
  return { httpOnly: true, sameSite: 'strict' as const, secure: config.secureCookies, path: '/' };
}

/** The pending sign-in's cookie; `__Host-` when PUBLIC_URL is https, like the session's. */
export function pendingCookieName(config: Pick<Config, 'secureCookies'>): string {
  return config.secureCookies ? '__Host-sign-in' : 'sign-in';
}

/** The passwordless ceremony's cookie. */
export function passkeyCookieName(config: Pick<Config, 'secureCookies'>): string {
  return config.secureCookies ? '__Host-passkey-sign-in' : 'passkey-sign-in';
}

export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const value = request.cookies[name];
  return value === undefined || value === '' ? undefined : value;
}

export function setShortCookie(reply: FastifyReply, config: Pick<Config, 'secureCookies'>, name: string, token: string): void {
  reply.setCookie(name, token, { ...cookieOptions(config), maxAge: PENDING_SIGN_IN_MS / 1000 });
}

export function clearShortCookie(reply: FastifyReply, config: Pick<Config, 'secureCookies'>, name: string): void {
  reply.clearCookie(name, cookieOptions(config));
}
