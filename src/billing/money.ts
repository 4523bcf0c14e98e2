/**
 * Money is integer micro-dollars everywhere inside (1 USD = 1,000,000) and a
 * decimal string with exactly six fractional digits on the wire: never a float.
 */
export const MICROS_PER_USD = 1_000_000;
const MS_PER_HOUR = 3_600_000;

/** `-0.013889` for -13,889 micro-dollars. */
export function formatMicros(micros: number): string {
  if (!Number.isSafeInteger(micros)) throw new RangeError(`not a whole number of micro-dollars: ${micros}`);
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  return `${sign}${Math.floor(abs / MICROS_PER_USD)}.${String(abs % MICROS_PER_USD).padStart(6, '0')}`;
}

/** `"5.00"` → 5,000,000; null unless a non-negative amount with at most six decimals. */
export function parseMicros(text: string): number | null {
  const match = /^(\d{1,9})(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) return null;
  return Number(match[1]) * MICROS_PER_USD + Number((match[2] ?? '').padEnd(6, '0'));
}

/** What `ms` of running time costs at `pricePerHour` micro-dollars, rounded up to the micro-dollar (exact: integer arithmetic). */
export function costOf(ms: number, pricePerHour: number): number {
  const product = BigInt(ms) * BigInt(pricePerHour);
  const hour = BigInt(MS_PER_HOUR);
  return Number((product + hour - 1n) / hour);
}
