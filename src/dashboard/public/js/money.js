// Money as people read it: to the cent, with the exact amount (the API keeps
// six decimals: machine time is metered per millisecond) on hover.
import { h } from './dom.js';

/** "-12.345678" → { negative: true, micros: 12345678 }. @param {string} amount */
function parse(amount) {
  const negative = amount.startsWith('-');
  const [whole = '0', fraction = ''] = amount.replace('-', '').split('.');
  return { negative, micros: Number(whole) * 1_000_000 + Number(fraction.padEnd(6, '0').slice(0, 6)) };
}

/** @param {number} cents */
function dollars(cents) {
  return `$${Math.floor(cents / 100).toLocaleString('en-US')}.${String(cents % 100).padStart(2, '0')}`;
}

/**
 * To the cent, rounded half up: "9.999871" → "$10.00", "-0.013889" → "−$0.01".
 * A charge too small for a cent reads "<$0.01" (with its sign), never "$0.00".
 * @param {string} amount  the API's decimal string
 */
export function usd(amount) {
  const { negative, micros } = parse(amount);
  const cents = Math.round(micros / 10_000);
  const sign = negative && micros > 0 ? '−' : '';
  if (cents === 0 && micros > 0) return `${sign}<$0.01`;
  return `${sign}${dollars(cents)}`;
}

/** Every digit that is not a trailing zero past the cents: "9.999871" → "$9.999871", "10.000000" → "$10.00". @param {string} amount */
export function exactUsd(amount) {
  const { negative, micros } = parse(amount);
  const digits = String(micros % 1_000_000).padStart(6, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${negative && micros > 0 ? '−' : ''}$${Math.floor(micros / 1_000_000).toLocaleString('en-US')}.${digits}`;
}

/**
 * An amount to the cent; the exact one in its tooltip when they differ.
 * @param {string} amount
 * @param {Record<string, unknown>} [props]
 */
export function money(amount, props = {}) {
  const shown = usd(amount);
  const exact = exactUsd(amount);
  return h('span', { class: 'money', title: exact === shown ? undefined : `${exact} exactly`, ...props }, shown);
}

/** A price per hour, exact (prices are set to the micro-dollar): "0.050000" → "$0.05/h", "0.125000" → "$0.125/h". @param {string} amount */
export function pricePerHour(amount) {
  return `${exactUsd(amount)}/h`;
}
