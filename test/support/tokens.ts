import { crc32 } from 'node:zlib';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The checksum as an offline secret scanner computes it (CONTRACT 3): CRC32 of the
 * 32 random characters, in base62, left-padded with "0" to 6 characters.
 * Written independently of src/shared/secrets.ts so the tests check the format, not the code.
 */
export function scannerChecksum(random: string): string {
  let value = BigInt(crc32(Buffer.from(random, 'utf8')));
  let digits = '';
  do {
    digits = BASE62[Number(value % 62n)] + digits;
    value /= 62n;
  } while (value > 0n);
  return digits.padStart(6, '0');
}

/** True when `token` is prefix + 32 base62 characters + their scanner checksum. */
export function hasValidChecksum(token: string, prefix: 'tmk_' | 'tmm_'): boolean {
  const match = new RegExp(`^${prefix}([0-9A-Za-z]{32})([0-9A-Za-z]{6})$`).exec(token);
  return match !== null && scannerChecksum(match[1]!) === match[2];
}

/** The same token with one checksum character changed. */
export function breakChecksum(token: string): string {
  const last = token.at(-1)!;
  return token.slice(0, -1) + (last === 'A' ? 'B' : 'A');
}
