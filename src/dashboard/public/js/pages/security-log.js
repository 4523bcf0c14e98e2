// The security log: what happened to the account (sign-ins, failed ones,
// password and factor changes, keys, grants), newest first, a page at a time.
import { api, messageOf, pagedList } from '../api.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { describeUserAgent, formatDate, formatRelative } from '../format.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';

/**
 * @typedef {object} SecurityLogEntry
 * @property {string} id
 * @property {string} type
 * @property {string} at
 * @property {string | null} ip
 * @property {string | null} userAgent
 * @property {unknown} detail
 */

const PAGE = 25;

/** Each type in words. */
const TYPES = /** @type {Record<string, string>} */ ({
  sign_in: 'Signed in',
  sign_in_failed: 'Sign-in failed',
  sign_out: 'Signed out',
  password_changed: 'Password changed',
  password_reset: 'Password reset',
  email_verified: 'Email address confirmed',
  totp_enabled: 'Authenticator app turned on',
  totp_disabled: 'Authenticator app turned off',
  passkey_added: 'Passkey added',
  passkey_removed: 'Passkey removed',
  passkey_renamed: 'Passkey renamed',
  recovery_codes_generated: 'New recovery codes made',
  recovery_code_used: 'Recovery code used',
  reauthenticated: 'Identity confirmed',
  api_key_created: 'API key created',
  api_key_revoked: 'API key revoked',
  oauth_grant_created: 'Application connected',
  oauth_grant_revoked: 'Application disconnected',
  session_revoked: 'Session signed out',
  webhook_secret_rotated: 'Webhook signing secret rotated',
});

/** Words for the values a detail may carry. */
const METHODS = /** @type {Record<string, string>} */ ({
  password: 'password',
  totp: 'authenticator app',
  recovery: 'recovery code',
  recovery_code: 'recovery code',
  passkey: 'passkey',
});

/** @param {string} type */
export function typeInWords(type) {
  const words = TYPES[type];
  if (words) return words;
  const text = type.replace(/[_.]+/g, ' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * A detail as a short line: "with a passkey", "“MacBook Touch ID”". Never
 * holds a secret (the API keeps none there); unknown keys read "key: value".
 * @param {unknown} detail
 */
export function detailInWords(detail) {
  if (detail === null || detail === undefined || detail === '') return '';
  if (typeof detail !== 'object') return String(detail);
  const parts = [];
  for (const [key, value] of Object.entries(/** @type {Record<string, unknown>} */ (detail))) {
    // Ids mean nothing to people; the name beside them does.
    if (value === null || value === undefined || value === '' || /.Id$/.test(key)) continue;
    if (key === 'count') parts.push(`${value} codes`);
    else if (key === 'method' || key === 'methods' || key === 'factor' || key === 'via') {
      const list = (Array.isArray(value) ? value : [value]).map((item) => METHODS[String(item)] ?? String(item));
      parts.push(`with ${list.join(' or ')}`);
    } else if (key === 'name' || key === 'keyName' || key === 'passkeyName' || key === 'clientName' || key === 'application') {
      parts.push(`“${String(value)}”`);
    } else if (typeof value === 'object') {
      parts.push(`${spaced(key)}: ${JSON.stringify(value)}`);
    } else {
      parts.push(`${spaced(key)}: ${String(value)}`);
    }
  }
  return parts.join(', ');
}

/** "reasonCode" → "reason code". @param {string} key */
function spaced(key) {
  return key.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/_/g, ' ').toLowerCase();
}

/** @returns {{ element: HTMLElement, refresh: () => Promise<void> }} */
export function securityLogCard() {
  const body = h('div', null, loading('Loading the security log…'));
  const footer = h('div');

  /** @type {ReturnType<typeof pagedList<SecurityLogEntry>>} */
  const entries = pagedList((cursor) => {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) query.set('cursor', cursor);
    return api('GET', `/api/me/security-log?${query}`);
  });

  async function refresh() {
    try {
      await entries.read();
      draw();
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  async function loadMore() {
    const before = entries.shown.length;
    try {
      await entries.more();
      draw();
      // The first new row takes the focus: the button that was pressed may be gone.
      const first = body.querySelectorAll('tbody tr')[before];
      first?.querySelector('td')?.focus();
    } catch (error) {
      toast(messageOf(error), 'error');
    }
  }

  function draw() {
    replace(body, entries.shown.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'Nothing yet'), h('p', null, 'Sign-ins and changes to your account appear here.'))
      : table('Security log', ['Event', 'Time', 'IP address', 'Device'], entries.shown.map(row)));
    replace(footer, entries.nextCursor ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older entries')) : null);
  }

  const element = card({
    title: 'Security log',
    id: 'security-log',
    flush: true,
    description: 'Sign-ins, failed sign-ins and changes to your password, second factors, API keys and connected applications, kept for 400 days. Something you do not recognise? Change your password and sign out your other sessions.',
  }, body, footer);
  return { element, refresh };
}

/** @param {SecurityLogEntry} entry */
function row(entry) {
  const detail = detailInWords(entry.detail);
  const time = h('time', { datetime: entry.at, title: formatRelative(entry.at) }, formatDate(entry.at));
  return h('tr', { dataset: { entryId: entry.id, type: entry.type } },
    h('td', { class: 'table__main', tabindex: '-1' },
      h('div', { class: 'table__primary' }, typeInWords(entry.type)),
      detail ? h('div', { class: 'table__secondary' }, detail) : null),
    cell('Time', time),
    cell('IP address', entry.ip ? h('span', { class: 'mono break' }, entry.ip) : h('span', { class: 'muted' }, 'Unknown')),
    cell('Device', h('span', { class: 'break', title: entry.userAgent ?? '' }, describeUserAgent(entry.userAgent))));
}
