// Account: who you are, the address confirmation, and the password.
import { api, messageOf } from '../api.js';
import { alertBox, badge, h, replace } from '../dom.js';
import { formatDate } from '../format.js';
import { field, mustMatch, simpleForm } from '../forms.js';
import { accountNav, card, pageHeader } from '../layout.js';
import { copyButton } from '../secret.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */

/** @param {PageContext} context */
export function accountPage({ account, path }) {
  if (!account) return [];
  return [
    pageHeader({ title: 'Account', description: 'Your profile, sign-in and API access.' }),
    accountNav(path),
    h('div', { class: 'stack' }, profileCard(account), passwordCard()),
  ];
}

/** @param {import('../session.js').Account} account */
function profileCard(account) {
  const emailStatus = h('span', { class: 'actions' });
  if (account.emailVerified) {
    emailStatus.append(badge('Confirmed', 'success'));
  } else {
    const resend = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Resend confirmation email'));
    resend.addEventListener('click', async () => {
      resend.disabled = true;
      try {
        await api('POST', '/api/me/verify-email');
        toast(`Confirmation email sent to ${account.email}.`);
      } catch (error) {
        toast(messageOf(error), 'error');
      } finally {
        resend.disabled = false;
      }
    });
    emailStatus.append(badge('Unconfirmed', 'warning'), resend);
  }
  return card({ title: 'Profile', id: 'profile' },
    h('dl', { class: 'kv' },
      h('dt', null, 'Name'), h('dd', null, account.name),
      h('dt', null, 'Email address'), h('dd', null, h('span', { class: 'break' }, account.email), emailStatus),
      h('dt', null, 'Account ID'), h('dd', null, h('code', null, account.id), copyButton(() => account.id, 'account ID', { small: true })),
      h('dt', null, 'Member since'), h('dd', null, formatDate(account.createdAt))));
}

function passwordCard() {
  const status = h('div');
  const current = field({ label: 'Current password', name: 'currentPassword', type: 'password', autocomplete: 'current-password', required: true });
  const next = field({ label: 'New password', name: 'newPassword', type: 'password', autocomplete: 'new-password', required: true, minlength: 8, maxlength: 256, hint: 'At least 8 characters.' });
  const repeat = field({ label: 'Repeat the new password', name: 'repeatPassword', type: 'password', autocomplete: 'new-password', required: true });
  mustMatch(next.input, repeat.input);
  const { form } = simpleForm({
    label: 'Change password',
    fields: [current.wrapper, h('div', { class: 'form-row' }, next.wrapper, repeat.wrapper)],
    submitLabel: 'Change password',
    onSubmit: async () => {
      replace(status);
      await api('POST', '/api/me/password', { currentPassword: current.input.value, newPassword: next.input.value });
      form.reset();
      replace(status, alertBox('success', 'Password changed. Every other session was signed out, and we emailed you a notice.'));
    },
  });
  return card({ title: 'Password', id: 'password', description: 'Changing it signs out every other session.' }, status, form);
}
