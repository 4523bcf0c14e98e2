import { randomInt } from 'node:crypto';
import { hashToken } from '../shared/secrets.ts';

export const RECOVERY_CODE_COUNT = 10;
/** Without 0/o, 1/l/i: codes are read off paper and typed by hand. */
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const GROUP_LENGTH = 5;

/**
 * Ten codes of two groups of five (`k7m2p-x9qrt`), about 49 bits each: far too
 * many to guess within the sign-in rate limit, so a plain SHA-256 is enough to store them.
 */
export function generateRecoveryCodes(): string[] {
  const group = () => Array.from({ length: GROUP_LENGTH }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => `${group()}-${group()}`);
}

/** Case, spaces and dashes are how people copy codes, not part of them. */
export function normalizeCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]/g, '');
}

export function hashRecoveryCode(code: string): string {
  return hashToken(`recovery:${normalizeCode(code)}`);
}
