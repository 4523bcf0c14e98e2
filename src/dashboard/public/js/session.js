// Who is signed in, as the API last said. Never holds anything secret.
import { api, ApiError } from './api.js';

/**
 * @typedef {{ id: string, email: string, name: string, emailVerified: boolean, createdAt: string }} Account
 */

/** @type {Account | null | undefined} undefined until asked */
let current;

/**
 * The signed-in account, or null. Asks the API the first time, or when `refresh`.
 * @param {boolean} [refresh]
 * @returns {Promise<Account | null>}
 */
export async function loadAccount(refresh = false) {
  if (current !== undefined && !refresh) return current;
  try {
    const answer = await api('GET', '/api/me');
    current = answer.account;
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) throw error;
    current = null;
  }
  return current ?? null;
}

/** @param {Account | null} account */
export function setAccount(account) {
  current = account;
}

export function currentAccount() {
  return current ?? null;
}

/**
 * @typedef {{ totp: boolean, passkeys: number, recoveryCodesLeft: number }} SecondFactor
 */

/**
 * The account's second factors, read afresh (they change on the Security page).
 * @returns {Promise<SecondFactor>}
 */
export async function loadSecondFactor() {
  const answer = await api('GET', '/api/me');
  const factors = answer?.secondFactor ?? answer?.account?.secondFactor ?? {};
  return { totp: factors.totp === true, passkeys: Number(factors.passkeys ?? 0), recoveryCodesLeft: Number(factors.recoveryCodesLeft ?? 0) };
}
