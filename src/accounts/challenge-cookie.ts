import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { invalidPasskey } from './second-factor.errors.ts';
import { signingKey } from './signing-keys.repository.ts';

/**
 * The passwordless sign-in's challenge, kept by the browser instead of the
 * database (issue 38: the options route is unauthenticated, and a row per
 * request let anyone grow storage without bound). The cookie holds
 * `<challenge>.<expiresAt>.<HMAC-SHA256 of both>`; the key is in the database,
 * so any process checks what another issued. Whether a challenge was already
 * used is recorded only when a sign-in succeeds (spent_challenges).
 */

const KEY_NAME = 'passkey-sign-in';
/** What the MAC covers is named, so a value signed for another purpose with the same key never passes here. */
const PURPOSE = 'passkey-sign-in';
const CHALLENGE = /^[A-Za-z0-9_-]{16,128}$/;
const EXPIRES_AT = /^\d{1,15}$/;
const MAC_BYTES = 32;

/** One load per database per process: the key never changes once made. */
const keys = new WeakMap<Kysely<DB>, Promise<Buffer>>();

function keyOf(db: Kysely<DB>, now: number): Promise<Buffer> {
  let key = keys.get(db);
  if (key === undefined) {
    key = signingKey(db, KEY_NAME, now);
    keys.set(db, key);
    // A failed load (the database was down) is tried again by the next request, not remembered.
    key.catch(() => keys.delete(db));
  }
  return key;
}

const macOf = (key: Buffer, challenge: string, expiresAt: number) => createHmac('sha256', key).update(`${PURPOSE}.${challenge}.${expiresAt}`).digest();

export async function sealChallenge(db: Kysely<DB>, challenge: string, expiresAt: number, now: number): Promise<string> {
  return `${challenge}.${expiresAt}.${macOf(await keyOf(db, now), challenge, expiresAt).toString('base64url')}`;
}

const passkeySignInExpired = () => new AppError(401, 'sign_in_expired', 'This passkey sign-in has expired (it lasts 5 minutes): ask for new options and try again.');

/**
 * The challenge a cookie of sealChallenge carries, and when it expires.
 * @throws AppError 401 invalid_passkey for a cookie this service did not issue (forged or altered), sign_in_expired once it has expired.
 */
export async function openChallenge(db: Kysely<DB>, cookie: string, now: number): Promise<{ challenge: string; expiresAt: number }> {
  const parts = cookie.split('.');
  const [challenge, expires, mac] = parts;
  const notIssued = () => invalidPasskey('The passkey sign-in cookie was not issued by this service or was altered: ask for new options and try again.');
  if (parts.length !== 3 || !CHALLENGE.test(challenge!) || !EXPIRES_AT.test(expires!)) throw notIssued();
  const given = Buffer.from(mac!, 'base64url');
  const expiresAt = Number(expires);
  if (given.length !== MAC_BYTES || !timingSafeEqual(given, macOf(await keyOf(db, now), challenge!, expiresAt))) throw notIssued();
  if (expiresAt <= now) throw passkeySignInExpired();
  return { challenge: challenge!, expiresAt };
}
