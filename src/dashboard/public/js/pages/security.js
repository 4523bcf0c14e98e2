// Security: the second factors (authenticator app, passkeys, recovery codes)
// and the security log. Turning a factor off and making new codes may ask for
// the password again first (reauth.js, through the API client).
import { api, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, badge, h, loading, replace, uid } from '../dom.js';
import { plural } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { accountNav, card, pageHeader } from '../layout.js';
import { copyButton } from '../secret.js';
import { loadSecondFactor } from '../session.js';
import { toast } from '../toast.js';
import { passkeysCard } from './security-passkeys.js';
import { securityLogCard } from './security-log.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('../session.js').SecondFactor} SecondFactor */

const RECOVERY_CODES = 10;

/** @param {PageContext} context */
export function securityPage({ path }) {
  const totpBody = h('div', null, loading('Loading…'));
  const recoveryBody = h('div', null, loading('Loading…'));
  const log = securityLogCard();
  const totpSection = card({
    title: 'Authenticator app',
    id: 'totp',
    description: 'After your password, sign-in asks for a 6-digit code from an app such as 1Password, Google Authenticator or Authy.',
  }, totpBody);
  const recoverySection = card({
    title: 'Recovery codes',
    id: 'recovery-codes',
    description: 'Single-use codes that sign you in when your authenticator app is not at hand.',
  }, recoveryBody);

  async function refresh() {
    try {
      const factors = await loadSecondFactor();
      replace(totpBody, totpStatus(factors, refresh));
      replace(recoveryBody, recoveryStatus(factors, refresh));
    } catch (error) {
      replace(totpBody, alertBox('error', messageOf(error)));
      replace(recoveryBody);
    }
    log.refresh();
  }

  refresh();
  return [
    pageHeader({ title: 'Account', description: 'Your profile, sign-in and API access.' }),
    accountNav(path),
    h('div', { class: 'stack' }, totpSection, passkeysCard(refresh), recoverySection, log.element),
  ];
}

/** @param {SecondFactor} factors @param {() => Promise<void>} refresh */
function totpStatus(factors, refresh) {
  if (!factors.totp) {
    const setUp = h('button', { type: 'button', class: 'btn btn--primary' }, 'Set up authenticator app');
    setUp.addEventListener('click', () => enrolTotp(refresh));
    return h('div', { class: 'factor' },
      h('div', { class: 'factor__state' }, badge('Off', 'neutral'), h('span', null, 'Sign-in asks only for your password.')),
      setUp);
  }
  const turnOff = h('button', { type: 'button', class: 'btn btn--danger-outline' }, 'Turn off');
  turnOff.addEventListener('click', () => disableTotp(refresh));
  return h('div', { class: 'factor' },
    h('div', { class: 'factor__state' }, badge('On', 'success'), h('span', null, 'Sign-in asks for a code after your password.')),
    turnOff);
}

/**
 * Enrolment: a new secret as a QR code and as text, confirmed by a first
 * code; then the recovery codes, shown once.
 * @param {() => Promise<void>} refresh
 */
function enrolTotp(refresh) {
  let enabled = false;
  const dialog = openDialog({
    title: 'Set up authenticator app',
    wide: true,
    content: [loading('Making a new secret…')],
    onClose: () => {
      if (enabled) refresh();
    },
  });
  api('POST', '/api/me/totp').then((enrolment) => {
    const code = field({
      label: 'Code from the app', name: 'code', autocomplete: 'one-time-code', inputmode: 'numeric', required: true, mono: true, maxlength: 10,
      hint: 'Enter the 6-digit code the app shows for Machine Platform.',
    });
    const { form } = simpleForm({
      label: 'Confirm the authenticator app',
      fields: [code.wrapper],
      submitLabel: 'Turn on',
      secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
      onSubmit: async () => {
        const answer = await api('POST', '/api/me/totp/confirm', { code: code.input.value.replace(/\s+/g, '') });
        enabled = true;
        toast('Authenticator app turned on.');
        dialog.setContent(...recoveryCodesView(codesOf(answer), dialog.close, 'Two-step verification is on. If you lose your phone, these codes are the way back into your account.'));
      },
    });
    const secretId = uid('totp-secret');
    dialog.setContent(
      h('ol', { class: 'enrol' },
        h('li', null,
          h('p', null, 'Scan this QR code with your authenticator app.'),
          h('img', { class: 'qr', src: svgDataUrl(String(enrolment.qrSvg ?? '')), alt: 'QR code of the setup key, for your authenticator app', width: 192, height: 192, 'data-secret': '' })),
        h('li', null,
          h('p', null, 'Cannot scan it? Enter this setup key in the app instead.'),
          h('div', { class: 'field' },
            h('label', { for: secretId }, 'Setup key'),
            h('div', { class: 'secret__row' },
              h('input', { id: secretId, class: 'input input--mono', type: 'text', readonly: true, value: enrolment.secret, autocomplete: 'off', spellcheck: 'false', 'data-secret': '' }),
              copyButton(() => String(enrolment.secret), 'setup key')))),
        h('li', null, h('p', null, 'Enter the code the app shows to confirm.'), form)));
  }).catch((/** @type {unknown} */ error) => {
    dialog.setContent(alertBox('error', messageOf(error)), h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Close')));
  });
}

/** An SVG from the API, as a picture: an <img> runs no script, and no HTML is parsed. @param {string} svg */
function svgDataUrl(svg) {
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
}

/** @param {() => Promise<void>} refresh */
function disableTotp(refresh) {
  let useCode = true;
  const code = field({ label: 'Code from the app', name: 'code', autocomplete: 'one-time-code', inputmode: 'numeric', required: true, mono: true, maxlength: 10 });
  const password = field({ label: 'Password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  password.wrapper.hidden = true;
  password.input.disabled = true;
  const switchButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'link-button' }, 'Use your password instead'));
  switchButton.addEventListener('click', () => {
    useCode = !useCode;
    code.wrapper.hidden = !useCode;
    code.input.disabled = !useCode;
    password.wrapper.hidden = useCode;
    password.input.disabled = useCode;
    switchButton.textContent = useCode ? 'Use your password instead' : 'Use a code from the app instead';
    (useCode ? code.input : password.input).focus();
  });
  const { form } = simpleForm({
    label: 'Turn off the authenticator app',
    fields: [
      h('p', null, 'Sign-in will ask only for your password, and your recovery codes stop working. Confirm with a code from the app or your password.'),
      code.wrapper,
      password.wrapper,
      h('p', null, switchButton),
    ],
    submitLabel: 'Turn off',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      await api('DELETE', '/api/me/totp', useCode ? { code: code.input.value.replace(/\s+/g, '') } : { password: password.input.value });
      dialog.close();
      toast('Authenticator app turned off.');
      await refresh();
    },
  });
  const submit = form.querySelector('button[type="submit"]');
  submit?.classList.replace('btn--primary', 'btn--danger');
  const dialog = openDialog({ title: 'Turn off the authenticator app?', content: [form] });
}

/** @param {SecondFactor} factors @param {() => Promise<void>} refresh */
function recoveryStatus(factors, refresh) {
  if (!factors.totp && factors.recoveryCodesLeft === 0) {
    return h('p', { class: 'muted' }, `You get ${RECOVERY_CODES} recovery codes when you set up the authenticator app.`);
  }
  const left = factors.recoveryCodesLeft;
  const regenerate = h('button', { type: 'button', class: 'btn' }, 'Make new codes');
  regenerate.addEventListener('click', async () => {
    /** @type {string[]} */
    let codes = [];
    const made = await confirmAction({
      title: 'Make new recovery codes?',
      message: 'The codes you have now stop working at once. Keep the new ones somewhere safe.',
      confirmLabel: 'Make new codes',
      action: async () => {
        codes = codesOf(await api('POST', '/api/me/recovery-codes'));
      },
    });
    if (!made) return;
    const dialog = openDialog({ title: 'Your new recovery codes', content: [], onClose: () => refresh() });
    dialog.setContent(...recoveryCodesView(codes, dialog.close, 'Your old codes no longer work.'));
  });
  return h('div', { class: 'factor' },
    h('div', { class: 'factor__state' },
      badge(`${left} of ${RECOVERY_CODES} left`, left <= 3 ? 'warning' : 'neutral', { plain: true }),
      h('span', null, left === 0 ? 'Make new codes: none is left.' : `Each code works once; ${plural(left, 'code')} can still be used.`)),
    regenerate);
}

/** The codes of an answer: {recoveryCodes: […]} (or {codes} / a bare list). @param {any} answer @returns {string[]} */
function codesOf(answer) {
  const codes = Array.isArray(answer) ? answer : answer?.recoveryCodes ?? answer?.codes ?? [];
  return codes.map(String);
}

/**
 * Recovery codes, shown once, with a copy button and a download.
 * @param {string[]} codes
 * @param {() => void} done
 * @param {string} lead
 */
function recoveryCodesView(codes, done, lead) {
  const text = `Machine Platform recovery codes\n\n${codes.join('\n')}\n\nEach code signs you in once.\n`;
  const download = h('a', {
    class: 'btn',
    href: URL.createObjectURL(new Blob([text], { type: 'text/plain' })),
    download: 'machine-platform-recovery-codes.txt',
  }, 'Download');
  const finish = h('button', { type: 'button', class: 'btn btn--primary', onclick: () => {
    URL.revokeObjectURL(download.getAttribute('href') ?? '');
    done();
  } }, 'I have saved them');
  return [
    h('div', { class: 'alert alert--warning', role: 'status' },
      h('div', { class: 'alert__body' },
        h('strong', null, 'Save these codes now: they will not be shown again.'),
        `${lead} Each code works once.`)),
    h('ol', { class: 'codes', 'aria-label': 'Recovery codes', 'data-secret': '', tabindex: '0', 'data-autofocus': '' }, codes.map((code) => h('li', null, h('code', null, code)))),
    h('div', { class: 'actions' }, copyButton(() => codes.join('\n'), 'recovery codes'), download),
    h('div', { class: 'dialog__footer' }, finish),
  ];
}
