import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { announce } from '../db/signals.ts';
import { inTransaction, type Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { invalidRequest, notFound } from '../http/errors.ts';
import { recordSecurityEvent, type RequestOrigin, type SecurityDetail } from '../security-log/security-log.ts';
import { toIso } from '../shared/clock.ts';
import { wrongCurrentPassword } from './accounts.errors.ts';
import { enforceSignInLimits } from './accounts.limits.ts';
import { factorNoticeJob } from './accounts.jobs.ts';
import type { FactorChange } from './accounts.mail.ts';
import { findAccountById } from './accounts.repository.ts';
import { verifyPassword } from './passwords.ts';
import { generateRecoveryCodes, hashRecoveryCode, normalizeCode } from './recovery-codes.ts';
import { invalidCode, noPendingTotp, totpAlreadyOn, totpOff } from './second-factor.errors.ts';
import {
  confirmTotpFactor,
  deleteTotpFactor,
  findTotpFactor,
  markSessionAuthenticated,
  replaceRecoveryCodes,
  upsertPendingTotp,
  useRecoveryCode,
  useTotpStep,
} from './second-factor.repository.ts';
import { isTotpCodeShaped, newTotpSecret, otpauthUrl, qrCodeSvg, totpStepOf } from './totp.ts';

export interface TotpEnrolment {
  secret: string;
  otpauthUrl: string;
  qrSvg: string;
}

/** A password or a second-factor code: what proves the holder is present. */
export type Proof = { password: string; code?: undefined } | { code: string; password?: undefined };

/**
 * A factor changed: the log entry, the mail to the holder and the signal that
 * drops cached copies of the account (an API key's `GET /api/me`), all in the change's transaction.
 */
export async function recordFactorChange(
  deps: Deps,
  tx: Tx,
  event: { accountId: string; change: FactorChange; at: number; origin: RequestOrigin | null; detail?: SecurityDetail; mailDetail?: string },
): Promise<void> {
  await recordSecurityEvent(tx.db, { accountId: event.accountId, type: event.change, at: event.at, origin: event.origin, ...(event.detail ? { detail: event.detail } : {}) });
  await deps.jobs.enqueue(tx, factorNoticeJob, [{ payload: { accountId: event.accountId, change: event.change, at: toIso(event.at), ...(event.mailDetail ? { detail: event.mailDetail } : {}) } }]);
  await announce(deps.signals, tx, `account:${event.accountId}`);
}

/** @throws AppError 404 (the account was deleted under a live credential). */
async function accountOf(db: Kysely<DB>, accountId: string) {
  const account = await findAccountById(db, accountId);
  if (account === undefined) throw notFound('The account');
  return account;
}

/**
 * A new secret, pending until a first code confirms it (a pending one is replaced).
 * @throws AppError 409 when an authenticator app is already on.
 */
export async function startTotpEnrolment(deps: Deps, accountId: string): Promise<TotpEnrolment> {
  const account = await accountOf(deps.db, accountId);
  const secret = newTotpSecret();
  if (!(await upsertPendingTotp(deps.db, accountId, secret, deps.clock.now()))) throw totpAlreadyOn();
  const url = otpauthUrl(secret, account.email);
  return { secret, otpauthUrl: url, qrSvg: await qrCodeSvg(url) };
}

/**
 * Turns the factor on with its first code, and makes the first recovery codes (shown only here).
 * @throws AppError 401 invalid_code, 409 when nothing is pending.
 */
export async function confirmTotpEnrolment(deps: Deps, accountId: string, code: string, origin: RequestOrigin): Promise<{ recoveryCodes: string[] }> {
  const factor = await findTotpFactor(deps.db, accountId);
  if (factor === undefined || factor.confirmed_at !== null) throw noPendingTotp();
  const now = deps.clock.now();
  const step = totpStepOf(factor.secret, code.replace(/\s/g, ''), now);
  if (step === null) throw invalidCode();
  const recoveryCodes = generateRecoveryCodes();
  const confirmed = await inTransaction(deps.database, async (tx) => {
    if (!(await confirmTotpFactor(tx.db, accountId, step, now))) return false;
    await replaceRecoveryCodes(tx.db, accountId, recoveryCodes.map(hashRecoveryCode), now);
    await recordFactorChange(deps, tx, { accountId, change: 'totp_enabled', at: now, origin });
    await recordSecurityEvent(tx.db, { accountId, type: 'recovery_codes_generated', at: now, origin, detail: { count: String(recoveryCodes.length) } });
    return true;
  });
  if (!confirmed) throw noPendingTotp();
  return { recoveryCodes };
}

/**
 * Checks a TOTP code (used once: its step is recorded) or a recovery code
 * (used once: marked used, logged and mailed). Answers which it was, or null
 * for a wrong, reused or stale code. The caller counts the attempt in the rate limit.
 */
export async function useSecondFactorCode(deps: Deps, accountId: string, rawCode: string, origin: RequestOrigin): Promise<'totp' | 'recovery' | null> {
  const code = rawCode.replace(/\s/g, '');
  const now = deps.clock.now();
  const factor = await findTotpFactor(deps.db, accountId);
  if (factor === undefined || factor.confirmed_at === null) return null;
  if (isTotpCodeShaped(code)) {
    const step = totpStepOf(factor.secret, code, now);
    return step !== null && (await useTotpStep(deps.db, accountId, step)) ? 'totp' : null;
  }
  if (normalizeCode(code).length === 0) return null;
  return inTransaction(deps.database, async (tx) => {
    if (!(await useRecoveryCode(tx.db, accountId, hashRecoveryCode(code), now))) return null;
    await recordFactorChange(deps, tx, { accountId, change: 'recovery_code_used', at: now, origin });
    return 'recovery' as const;
  });
}

/**
 * The password or a code, counted in the account's sign-in rate limit.
 * @throws AppError 401 (invalid_credentials for a password, invalid_code for a code), 429.
 */
export async function verifyProof(deps: Deps, accountId: string, proof: Proof, origin: RequestOrigin): Promise<'password' | 'totp' | 'recovery'> {
  const account = await accountOf(deps.db, accountId);
  await enforceSignInLimits(deps, account.email, origin.ip);
  if (proof.password !== undefined) {
    if (!(await verifyPassword(proof.password, account.passwordHash))) throw wrongCurrentPassword();
    return 'password';
  }
  const used = await useSecondFactorCode(deps, accountId, proof.code, origin);
  if (used === null) throw invalidCode();
  return used;
}

/** @throws AppError 400 unless exactly one of password and code is given. */
export function oneProof(body: { password?: string | undefined; code?: string | undefined }): Proof {
  if (body.password !== undefined && body.code === undefined) return { password: body.password };
  if (body.code !== undefined && body.password === undefined) return { code: body.code };
  throw invalidRequest('Send either password or code.');
}

/**
 * Turns the authenticator app off (and with it the recovery codes, which only stand in for it).
 * The caller has checked recent authentication.
 * @throws AppError 401 wrong password or code, 409 when it is not on, 429.
 */
export async function disableTotp(deps: Deps, accountId: string, proof: Proof, origin: RequestOrigin): Promise<void> {
  const factor = await findTotpFactor(deps.db, accountId);
  if (factor === undefined || factor.confirmed_at === null) throw totpOff();
  await verifyProof(deps, accountId, proof, origin);
  const now = deps.clock.now();
  await inTransaction(deps.database, async (tx) => {
    if (!(await deleteTotpFactor(tx.db, accountId))) return;
    await replaceRecoveryCodes(tx.db, accountId, [], now);
    await recordFactorChange(deps, tx, { accountId, change: 'totp_disabled', at: now, origin });
  });
}

/**
 * A new set of 10 recovery codes; the old ones stop working. The caller has checked recent authentication.
 * @throws AppError 409 when the authenticator app is not on (the codes stand in for it).
 */
export async function regenerateRecoveryCodes(deps: Deps, accountId: string, origin: RequestOrigin): Promise<{ recoveryCodes: string[] }> {
  const factor = await findTotpFactor(deps.db, accountId);
  if (factor === undefined || factor.confirmed_at === null) throw totpOff();
  const recoveryCodes = generateRecoveryCodes();
  const now = deps.clock.now();
  await inTransaction(deps.database, async (tx) => {
    await replaceRecoveryCodes(tx.db, accountId, recoveryCodes.map(hashRecoveryCode), now);
    await recordFactorChange(deps, tx, { accountId, change: 'recovery_codes_generated', at: now, origin, detail: { count: String(recoveryCodes.length) } });
  });
  return { recoveryCodes };
}

/**
 * Renews the session's recent authentication with the password or a code.
 * @throws AppError 401 wrong password or code, 429.
 */
export async function reauthenticate(deps: Deps, accountId: string, sessionId: string, proof: Proof, origin: RequestOrigin): Promise<void> {
  await verifyProof(deps, accountId, proof, origin);
  await markSessionAuthenticated(deps.db, sessionId, deps.clock.now());
}

/** Whether a password sign-in needs a second step. */
export async function hasTotp(db: Kysely<DB>, accountId: string): Promise<boolean> {
  const factor = await findTotpFactor(db, accountId);
  return factor !== undefined && factor.confirmed_at !== null;
}
