import type { Deps } from '../deps.ts';
import { HOUR, MINUTE } from '../shared/clock.ts';
import { allows, enforceLimits, type Limit } from '../rate-limits/rate-limiter.ts';

/** Sign-in, sign-up and emailed-link limits. Counted whether or not the account exists, so limits reveal nothing. */
export const LIMITS = {
  signInPerEmail: { max: 10, windowMs: 15 * MINUTE },
  signInPerIp: { max: 100, windowMs: 15 * MINUTE },
  signUpPerEmail: { max: 5, windowMs: HOUR },
  signUpPerIp: { max: 20, windowMs: HOUR },
  mailPerEmail: { max: 5, windowMs: HOUR },
  /** Beyond the per-address mail limit: stops one client from mailing many strangers through `forgot`. */
  resetMailPerIp: { max: 20, windowMs: HOUR },
  /**
   * Guessing emailed tokens (32 random bytes) is hopeless, but each
   * reset attempt with a live token costs a password hash, and each attempt costs a query.
   * A person needs one or two; a page reloaded in a loop stays well under.
   */
  resetPerIp: { max: 20, windowMs: 15 * MINUTE },
  verifyPerIp: { max: 60, windowMs: 15 * MINUTE },
} satisfies Record<string, Limit>;

/** @throws AppError 429 */
export async function enforceSignInLimits(deps: Deps, email: string, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [
    // The address first: over its limit, the email's counter is neither made nor counted.
    { key: `sign-in:ip:${ip}`, limit: LIMITS.signInPerIp },
    { key: `sign-in:email:${email}`, limit: LIMITS.signInPerEmail },
  ], deps.clock.now());
}

/**
 * A passwordless (passkey) sign-in names no account until it is verified: it counts per IP, with password sign-ins.
 * @throws AppError 429
 */
export async function enforcePasskeySignInLimit(deps: Deps, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [{ key: `sign-in:ip:${ip}`, limit: LIMITS.signInPerIp }], deps.clock.now());
}

/** @throws AppError 429 */
export async function enforceSignUpLimits(deps: Deps, email: string, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [
    { key: `sign-up:ip:${ip}`, limit: LIMITS.signUpPerIp },
    { key: `sign-up:email:${email}`, limit: LIMITS.signUpPerEmail },
  ], deps.clock.now());
}

/** @throws AppError 429 */
export async function enforceVerificationMailLimit(deps: Deps, email: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [{ key: `mail:email:${email}`, limit: LIMITS.mailPerEmail }], deps.clock.now());
}

/** @throws AppError 429 */
export async function enforceResetLimit(deps: Deps, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [{ key: `reset:ip:${ip}`, limit: LIMITS.resetPerIp }], deps.clock.now());
}

/** @throws AppError 429 */
export async function enforceVerifyLimit(deps: Deps, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  await enforceLimits(deps.db, [{ key: `verify:ip:${ip}`, limit: LIMITS.verifyPerIp }], deps.clock.now());
}

export async function resetMailAllowed(deps: Deps, email: string, ip: string): Promise<boolean> {
  if (!deps.config.rateLimit) return true;
  return allows(deps.db, [
    { key: `reset-mail:ip:${ip}`, limit: LIMITS.resetMailPerIp },
    { key: `mail:email:${email}`, limit: LIMITS.mailPerEmail },
  ], deps.clock.now());
}
