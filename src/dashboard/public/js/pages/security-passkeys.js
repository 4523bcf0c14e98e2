// Passkeys: added on this device (named, so they can be told apart), listed
// with when they were added and last used, renamed and removed.
import { api, itemsOf, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { timeElement } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';
import { createPasskey, passkeysSupported } from '../webauthn.js';

/** @typedef {{ id: string, name: string, createdAt: string, lastUsedAt: string | null }} Passkey */

/** @param {() => Promise<void>} onChange  redraws what depends on the factors */
export function passkeysCard(onChange) {
  const body = h('div', null, loading('Loading passkeys…'));
  const supported = passkeysSupported();
  const add = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary', disabled: !supported }, 'Add a passkey'));
  add.addEventListener('click', () => openAddDialog(async () => {
    await refresh();
    await onChange();
  }));
  const section = card({
    title: 'Passkeys',
    id: 'passkeys',
    flush: true,
    description: 'Sign in with your fingerprint, face, screen lock or a security key: instead of your password, or as the step after it.',
    actions: [add],
  }, supported ? null : h('div', { class: 'card__body' }, alertBox('info', 'This browser cannot use passkeys here. Open the dashboard in a recent browser, at its https:// address.')), body);

  async function refresh() {
    try {
      /** @type {Passkey[]} */
      const passkeys = itemsOf(await api('GET', '/api/me/passkeys'));
      replace(body, passkeys.length === 0
        ? h('div', { class: 'empty' }, h('h3', null, 'No passkeys yet'), h('p', null, 'Add one to sign in without typing a password.'))
        : table('Passkeys', ['Name', 'Added', 'Last used', ''], passkeys.map(row)));
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  /** @param {Passkey} passkey */
  function row(passkey) {
    const rename = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Rename ${passkey.name}` }, 'Rename');
    rename.addEventListener('click', () => openRenameDialog(passkey, refresh));
    const remove = h('button', { type: 'button', class: 'btn btn--small btn--danger-outline', 'aria-label': `Remove ${passkey.name}` }, 'Remove');
    remove.addEventListener('click', async () => {
      const removed = await confirmAction({
        title: 'Remove passkey?',
        message: h('p', null, h('strong', null, passkey.name), ' will no longer sign you in. The device may still list it: remove it there too.'),
        confirmLabel: 'Remove passkey',
        danger: true,
        action: () => api('DELETE', `/api/me/passkeys/${encodeURIComponent(passkey.id)}`),
      });
      if (!removed) return;
      toast(`Passkey "${passkey.name}" removed.`);
      await refresh();
      await onChange();
      add.focus();
    });
    return h('tr', { dataset: { passkeyId: passkey.id } },
      h('td', { class: 'table__main' }, h('div', { class: 'table__primary' }, passkey.name)),
      cell('Added', timeElement(passkey.createdAt)),
      cell('Last used', timeElement(passkey.lastUsedAt, 'Never')),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, rename, remove)));
  }

  refresh();
  return section;
}

/** @param {() => Promise<void>} refresh */
function openAddDialog(refresh) {
  const name = field({ label: 'Name', name: 'name', required: true, maxlength: 100, hint: 'To tell it apart from your other passkeys, e.g. "MacBook Touch ID" or "YubiKey".' });
  name.input.setAttribute('data-autofocus', '');
  const { form } = simpleForm({
    label: 'Add a passkey',
    fields: [name.wrapper],
    submitLabel: 'Continue',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      const options = await api('POST', '/api/me/passkeys/options');
      const response = await createPasskey(options?.options ?? options);
      const passkey = await api('POST', '/api/me/passkeys', { name: name.input.value.trim(), response });
      dialog.close();
      toast(`Passkey "${passkey?.name ?? name.input.value.trim()}" added.`);
      await refresh();
    },
  });
  const dialog = openDialog({
    title: 'Add a passkey',
    content: [h('p', null, 'Your browser will ask you to confirm with your fingerprint, face, screen lock or security key.'), form],
  });
}

/** @param {Passkey} passkey @param {() => Promise<void>} refresh */
function openRenameDialog(passkey, refresh) {
  const name = field({ label: 'Name', name: 'name', required: true, maxlength: 100, value: passkey.name });
  name.input.setAttribute('data-autofocus', '');
  const { form } = simpleForm({
    label: 'Rename passkey',
    fields: [name.wrapper],
    submitLabel: 'Save',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      await api('PATCH', `/api/me/passkeys/${encodeURIComponent(passkey.id)}`, { name: name.input.value.trim() });
      dialog.close();
      toast('Passkey renamed.');
      await refresh();
    },
  });
  const dialog = openDialog({ title: 'Rename passkey', content: [form] });
}
