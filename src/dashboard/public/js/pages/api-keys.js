// API keys: created here, shown once, listed by prefix with when they were last used, revoked.
import { api, listAll, messageOf } from '../api.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { timeElement } from '../format.js';
import { confirmAction, openDialog } from '../dialog.js';
import { field, simpleForm } from '../forms.js';
import { accountNav, card, pageHeader } from '../layout.js';
import { secretField } from '../secret.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {{ id: string, name: string, prefix: string, createdAt: string, lastUsedAt: string | null }} ApiKey */

/** @param {PageContext} context */
export function apiKeysPage({ path }) {
  const body = h('div', null, loading('Loading API keys…'));
  const create = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Create API key'));
  create.addEventListener('click', () => openCreateDialog(refresh));
  const section = card({
    title: 'API keys',
    id: 'api-keys',
    flush: true,
    description: 'A key acts as your account: machines, billing and the platform MCP. Send it as "Authorization: Bearer tmk_…".',
    actions: [create],
  }, body);

  async function refresh() {
    try {
      /** @type {ApiKey[]} */
      const keys = await listAll('/api/keys');
      replace(body, keys.length === 0
        ? h('div', { class: 'empty' }, h('h3', null, 'No API keys yet'), h('p', null, 'Create a key to call the API or connect an agent to the platform MCP.'))
        : table('API keys', ['Name', 'Key', 'Created', 'Last used', ''], keys.map(row)));
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  /** @param {ApiKey} key */
  function row(key) {
    const revoke = h('button', { type: 'button', class: 'btn btn--small btn--danger-outline', 'aria-label': `Revoke ${key.name}` }, 'Revoke');
    revoke.addEventListener('click', async () => {
      const revoked = await confirmAction({
        title: 'Revoke API key?',
        message: h('p', null, 'Anything that uses ', h('strong', null, key.name), ` (${key.prefix}…) stops working at once. This cannot be undone.`),
        confirmLabel: 'Revoke key',
        danger: true,
        action: () => api('DELETE', `/api/keys/${encodeURIComponent(key.id)}`),
      });
      if (!revoked) return;
      toast(`API key "${key.name}" revoked.`);
      await refresh();
      create.focus();
    });
    return h('tr', { dataset: { keyId: key.id } },
      h('td', { class: 'table__main' }, h('div', { class: 'table__primary' }, key.name)),
      cell('Key', h('code', null, `${key.prefix}…`)),
      cell('Created', timeElement(key.createdAt)),
      cell('Last used', timeElement(key.lastUsedAt, 'Never')),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, revoke)));
  }

  refresh();
  return [pageHeader({ title: 'Account', description: 'Your profile, sign-in and API access.' }), accountNav(path), section];
}

/** @param {() => Promise<void>} refresh */
function openCreateDialog(refresh) {
  const name = field({ label: 'Name', name: 'name', required: true, maxlength: 100, hint: 'What uses this key, e.g. "CI deploys" or "Claude agent".' });
  name.input.setAttribute('data-autofocus', '');
  const { form } = simpleForm({
    label: 'Create API key',
    fields: [name.wrapper],
    submitLabel: 'Create key',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      const answer = await api('POST', '/api/keys', { name: name.input.value.trim() });
      dialog.setContent(
        secretField({ label: 'API key', value: answer.key, note: 'We store only a hash of it: if it is lost, revoke it and create a new one.' }),
        h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')));
      refresh();
    },
  });
  const dialog = openDialog({ title: 'Create API key', content: [form] });
}
