// The OAuth consent page: an MCP client (a hosted connector, say) asks to act for the signed-in account.
import { api, messageOf } from '../api.js';
import { alertBox, h, loading, replace } from '../dom.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {{ client: { id: string, name: string, redirectHost: string }, scopes: string[] }} Consent */

/** @param {PageContext} context */
export function consentPage({ query, account }) {
  const uid = query.get('uid') ?? '';
  const container = h('div', { class: 'auth__card auth__card--page' }, loading('Loading the request…'));

  async function load() {
    try {
      /** @type {Consent} */
      const consent = await api('GET', `/api/oauth/consent/${encodeURIComponent(uid)}`);
      show(consent);
    } catch (error) {
      replace(container, h('h1', null, 'This request cannot be answered'), alertBox('error', messageOf(error)));
    }
  }

  /** @param {Consent} consent */
  function show({ client }) {
    const status = h('div');
    const allow = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Allow'));
    const deny = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Deny'));
    /** @param {'allow' | 'deny'} answer */
    const answer = async (answer) => {
      allow.disabled = true;
      deny.disabled = true;
      try {
        const { redirectTo } = await api('POST', `/api/oauth/consent/${encodeURIComponent(uid)}/${answer}`);
        window.location.assign(redirectTo);
      } catch (error) {
        replace(status, alertBox('error', messageOf(error)));
        allow.disabled = false;
        deny.disabled = false;
      }
    };
    allow.addEventListener('click', () => answer('allow'));
    deny.addEventListener('click', () => answer('deny'));
    replace(container,
      h('h1', { id: 'consent-title' }, 'Connect an application'),
      h('p', { id: 'consent-question' },
        'Allow ', h('strong', null, client.name), ` (${client.redirectHost}) to use your machines and event webhooks through MCP?`),
      h('p', { class: 'muted' }, `Signed in as ${account?.email ?? ''}. You can revoke it at any time under Account → Connected applications.`),
      status,
      h('div', { class: 'actions' }, allow, deny));
    allow.focus();
  }

  load();
  return container;
}
