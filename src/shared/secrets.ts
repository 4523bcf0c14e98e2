import { hash, randomBytes, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const TOKEN_RANDOM_LENGTH = 32;
const TOKEN_CHECKSUM_LENGTH = 6;

/** API keys, machine tokens, and OAuth access and refresh tokens. */
export type TokenPrefix = 'tmk_' | 'tmm_' | 'tmo_' | 'tmr_';

/**
 * GitHub's token format: prefix, 32 random base62 characters, then the CRC32 of
 * those characters in 6 base62 characters, so secret scanners can recognise a
 * token offline and typos are rejected without a database lookup.
 */
export function generateToken(prefix: TokenPrefix): string {
  let random = '';
  for (let i = 0; i < TOKEN_RANDOM_LENGTH; i++) random += BASE62[randomInt(62)];
  return prefix + random + checksum(random);
}

export function isWellFormedToken(token: string, prefix: TokenPrefix): boolean {
  if (token.length !== prefix.length + TOKEN_RANDOM_LENGTH + TOKEN_CHECKSUM_LENGTH || !token.startsWith(prefix)) return false;
  const random = token.slice(prefix.length, prefix.length + TOKEN_RANDOM_LENGTH);
  const check = token.slice(prefix.length + TOKEN_RANDOM_LENGTH);
  return /^[0-9A-Za-z]+$/.test(random) && checksum(random) === check;
}

function checksum(random: string): string {
  let value = crc32(random);
  let encoded = '';
  while (value > 0) {
    encoded = BASE62[value % 62] + encoded;
    value = Math.floor(value / 62);
  }
  return encoded.padStart(TOKEN_CHECKSUM_LENGTH, '0');
}

/** Session and emailed-link tokens: 32 random bytes, base64url. */
export function generateOpaqueToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Webhook signing secrets: `whsec_` + base64 of 32 random bytes. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Every token is stored only as this digest. */
export function hashToken(token: string): string {
  // One-shot: a third of createHash's cost, on every authenticated request.
  return hash('sha256', token, 'hex');
}
