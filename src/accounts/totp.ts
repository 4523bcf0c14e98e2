import { Secret, TOTP } from 'otpauth';

/** RFC 6238 as authenticator apps expect it: SHA-1, 6 digits, 30-second steps. */
const PERIOD_SECONDS = 30;
const DIGITS = 6;
/** Codes of the step before and after now are accepted too: a phone's clock a little off, a code typed as it changed. */
const SKEW_STEPS = 1;
const ISSUER = 'Machine Platform';
/** 160 bits, RFC 4226's recommended length. */
const SECRET_BYTES = 20;

/** A new secret, in the base32 authenticator apps take. */
export function newTotpSecret(): string {
  return new Secret({ size: SECRET_BYTES }).base32;
}

function totpOf(secret: string, label: string): TOTP {
  return new TOTP({ issuer: ISSUER, label, algorithm: 'SHA1', digits: DIGITS, period: PERIOD_SECONDS, secret: Secret.fromBase32(secret) });
}

/** The `otpauth://totp/…` URI an app scans. */
export function otpauthUrl(secret: string, accountEmail: string): string {
  return totpOf(secret, accountEmail).toString();
}

/** The URI as a QR code, an SVG document (the encoder, about 10 MB, loaded at the first enrolment). */
export async function qrCodeSvg(url: string): Promise<string> {
  const { default: QRCode } = await import('qrcode');
  return QRCode.toString(url, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
}

export const isTotpCodeShaped = (code: string) => /^\d{6}$/.test(code);

/**
 * The step of the code, if it is right for now ± one step; null otherwise.
 * The caller refuses a step at or before the last one accepted (replay).
 */
export function totpStepOf(secret: string, code: string, now: number): number | null {
  if (!isTotpCodeShaped(code)) return null;
  const delta = totpOf(secret, '').validate({ token: code, timestamp: now, window: SKEW_STEPS });
  return delta === null ? null : Math.floor(now / 1000 / PERIOD_SECONDS) + delta;
}

/** The code of the step at `at` (tests and the software authenticator compute codes this way too). */
export function totpCodeAt(secret: string, at: number): string {
  return totpOf(secret, '').generate({ timestamp: at });
}
