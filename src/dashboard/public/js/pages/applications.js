// Connected applications: the OAuth grants of the account (hosted connectors and other MCP clients), each revocable.
import { api, listAll, messageOf } from '../api.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { timeElement } from '../format.js';
import { confirmAction } from '../dialog.js';
import { accountNav, card, pageHeader } from '../layout.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {{ id: string, clientId: string, clientName: string, redirectHost: string, createdAt: string, lastUsedAt: string | null }} Application */

/** @param {PageContext} context */
export function applicationsPage({ path }) {
  const body = h('div', null, loading('Loading connected applications…'));
  const section = card({
    title: 'Connected applications',
    id: 'applications',
    flush: true,
    description: 'Applications you allowed to use your machines and event webhooks through MCP (signed in with OAuth). Revoking one ends its access at once.',
  }, body);

  async function refresh() {
    try {
      /** @type {Application[]} */
      const applications = await listAll('/api/me/applications');
      replace(body, applications.length === 0
        ? h('div', { class: 'empty' }, h('h3', null, 'No connected applications'), h('p', null, 'When you connect an MCP client such as a hosted connector, it is listed here.'))
        : table('Connected applications', ['Application', 'Connected', 'Last used', ''], applications.map(row)));
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  /** @param {Application} application */
  function row(application) {
    const revoke = h('button', { type: 'button', class: 'btn btn--small btn--danger-outline', 'aria-label': `Revoke ${application.clientName}` }, 'Revoke');
    revoke.addEventListener('click', async () => {
      const revoked = await confirmAction({
        title: 'Revoke application?',
        message: h('p', null, h('strong', null, application.clientName), ` (${application.redirectHost}) loses access to your account at once. It can ask again, and you decide again.`),
        confirmLabel: 'Revoke access',
        danger: true,
        action: () => api('DELETE', `/api/me/applications/${encodeURIComponent(application.id)}`),
      });
      if (!revoked) return;
      toast(`"${application.clientName}" no longer has access.`);
      await refresh();
    });
    return h('tr', { dataset: { applicationId: application.id } },
      h('td', { class: 'table__main' }, h('div', { class: 'table__primary' }, application.clientName), h('div', { class: 'table__secondary' }, application.redirectHost)),
      cell('Connected', timeElement(application.createdAt)),
      cell('Last used', timeElement(application.lastUsedAt, 'Never')),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, revoke)));
  }

  refresh();
  return [pageHeader({ title: 'Account', description: 'Your profile, sign-in and API access.' }), accountNav(path), section];
}
