// The recent-authentication prompt: an action that needs the password or a
// code entered in the last 10 minutes is refused with 403
// reauthentication_required; the API client (api.js) then asks here, and
// sends the action once more when the person confirmed.
import { api, setReauthenticationPrompt } from './api.js';
import { openDialog } from './dialog.js';
import { h } from './dom.js';
import { field, simpleForm } from './forms.js';
import { loadSecondFactor } from './session.js';

/** @returns {Promise<boolean>} true once the API renewed the recent authentication */
export async function promptReauthentication() {
  const factors = await loadSecondFactor().catch(() => null);
  return new Promise((resolve) => {
    let confirmed = false;
    let useCode = false;
    const password = field({ label: 'Password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
    const code = field({
      // No numeric keypad: a recovery code has letters.
      label: 'Authentication code', name: 'code', autocomplete: 'one-time-code', required: true, mono: true, maxlength: 32,
      hint: 'The 6-digit code from your authenticator app, or a recovery code.',
    });
    password.input.setAttribute('data-autofocus', '');
    code.wrapper.hidden = true;
    code.input.disabled = true;
    const switchButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'link-button' }, 'Use a code from your authenticator app instead'));
    switchButton.addEventListener('click', () => {
      useCode = !useCode;
      password.wrapper.hidden = useCode;
      password.input.disabled = useCode;
      code.wrapper.hidden = !useCode;
      code.input.disabled = !useCode;
      switchButton.textContent = useCode ? 'Use your password instead' : 'Use a code from your authenticator app instead';
      (useCode ? code.input : password.input).focus();
    });
    const { form } = simpleForm({
      label: 'Confirm it is you',
      fields: [
        h('p', null, 'For your security, confirm it is you before this change. You will not be asked again for 10 minutes.'),
        password.wrapper,
        code.wrapper,
        factors?.totp ? h('p', null, switchButton) : null,
      ],
      submitLabel: 'Confirm',
      secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
      onSubmit: async () => {
        await api('POST', '/api/me/reauthenticate', useCode ? { code: code.input.value.replace(/\s+/g, '') } : { password: password.input.value });
        confirmed = true;
        dialog.close();
      },
    });
    const dialog = openDialog({ title: 'Confirm it is you', content: [form], onClose: () => resolve(confirmed) });
  });
}

setReauthenticationPrompt(promptReauthentication);
