// The signed-out pages: sign in, sign up, forgot and reset password, and the
// page an emailed confirmation link opens.
import { api, ApiError, messageOf } from '../api.js';
import { alertBox, h, replace } from '../dom.js';
import { field, mustMatch, simpleForm } from '../forms.js';
import { navigate, nextPath, setFlash } from '../navigation.js';
import { loadAccount, setAccount } from '../session.js';
import { passkeysSupported, usePasskey } from '../webauthn.js';

/** @typedef {import('../routes.js').PageContext} PageContext */

const PASSWORD_RULE = { minlength: 8, maxlength: 256, hint: 'At least 8 characters. A long passphrase is best.' };

/** @param {string} text */
function heading(text) {
  return h('h1', { tabindex: '-1' }, text);
}

/** @param {PageContext} context */
export function signInPage({ query }) {
  const container = h('div');
  const email = field({ label: 'Email address', name: 'email', type: 'email', autocomplete: 'username webauthn', required: true });
  const password = field({
    label: 'Password', name: 'password', type: 'password', autocomplete: 'current-password', required: true,
    aside: h('a', { href: '/forgot-password' }, 'Forgot password?'),
  });
  const { form } = simpleForm({
    label: 'Sign in',
    fields: [email.wrapper, password.wrapper],
    submitLabel: 'Sign in',
    block: true,
    onSubmit: async () => {
      const answer = await api('POST', '/api/auth/login', { email: email.input.value.trim(), password: password.input.value });
      if (answer?.secondFactor?.required) {
        replace(container, ...secondFactorStep(query, answer.secondFactor.methods ?? []));
        container.querySelector('h1')?.focus();
        return;
      }
      await signedIn(answer, query);
    },
  });
  replace(container,
    heading('Sign in'),
    h('p', { class: 'intro' }, 'Welcome back. Sign in to manage your machines, event webhooks and API keys.'),
    form,
    passkeysSupported() ? passkeySignIn(query) : null,
    h('p', { class: 'auth__footer' }, 'New to Machine Platform? ', h('a', { href: '/sign-up' }, 'Create an account')));
  return container;
}

/** @param {any} answer  the API's {account} @param {URLSearchParams} query */
async function signedIn(answer, query) {
  setAccount(answer.account);
  await navigate(nextPath(query));
}

/**
 * Signing in with a passkey: no address, no password; the browser offers the
 * passkeys it holds for this site, and the API signs in the account of the one
 * chosen. (The button says "Use a passkey": a name with "Sign in" in it would
 * read as a second "Sign in" button.)
 * @param {URLSearchParams} query
 */
function passkeySignIn(query) {
  const hint = h('p', { class: 'field__hint', id: 'passkey-sign-in-hint' }, 'Sign in without your password, with a passkey saved on this device or a security key.');
  const { button, error } = passkeyButton({ 'aria-describedby': hint.id }, async () => {
    const options = await api('POST', '/api/auth/passkey/options');
    const response = await usePasskey(options?.options ?? options);
    await signedIn(await api('POST', '/api/auth/passkey', { response }), query);
  });
  return h('div', { class: 'form mt-3' }, h('p', { class: 'divider' }, 'or'), error, button, hint);
}

/**
 * The second step of signing in to an account with a second factor: the
 * password was right, and the API holds a pending sign-in (5 minutes) that a
 * code from the authenticator app, a recovery code or a passkey completes.
 * @param {URLSearchParams} query
 * @param {string[]} methods  "totp", "recovery", "passkey"
 * @param {string} [lead]  what happened before this step (a reset password)
 */
function secondFactorStep(query, methods, lead) {
  let recovery = !methods.includes('totp');
  const title = heading('Two-step verification');
  const intro = h('p', { class: 'intro' });
  const code = field({ label: 'Authentication code', name: 'code', autocomplete: 'one-time-code', required: true, mono: true, maxlength: 32 });
  const hint = h('div', { class: 'field__hint', id: `${code.input.id}-hint` });
  code.wrapper.append(hint);
  code.input.setAttribute('aria-describedby', hint.id);
  const label = /** @type {HTMLLabelElement} */ (code.wrapper.querySelector('label'));
  const switchButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'link-button' }));
  const show = () => {
    label.textContent = recovery ? 'Recovery code' : 'Authentication code';
    intro.textContent = recovery
      ? 'Enter one of the recovery codes you saved when you set up two-step verification. Each code works once.'
      : 'Enter the 6-digit code from your authenticator app.';
    hint.textContent = recovery ? 'For example xxxxx-xxxxx.' : 'The code changes every 30 seconds.';
    if (recovery) code.input.removeAttribute('inputmode');
    else code.input.setAttribute('inputmode', 'numeric');
    switchButton.textContent = recovery ? 'Use your authenticator app instead' : 'Use a recovery code instead';
  };
  switchButton.addEventListener('click', () => {
    recovery = !recovery;
    code.input.value = '';
    show();
    code.input.focus();
  });
  show();
  const { form } = simpleForm({
    label: 'Two-step verification',
    fields: [code.wrapper],
    submitLabel: 'Verify',
    block: true,
    onSubmit: async () => {
      const value = recovery ? code.input.value.trim() : code.input.value.replace(/\s+/g, '');
      await signedIn(await api('POST', '/api/auth/login/second-factor', { code: value }), query);
    },
  });
  const others = [];
  if (methods.includes('totp') && methods.includes('recovery')) others.push(h('p', null, switchButton));
  if (methods.includes('passkey') && passkeysSupported()) others.push(passkeySecondFactor(query));
  return [
    title,
    lead ? alertBox('success', lead) : null,
    intro,
    form,
    others.length > 0 ? h('div', { class: 'form mt-3' }, others) : null,
    h('p', { class: 'auth__footer' }, h('a', { href: `/sign-in${location.search}` }, 'Back to sign in')),
  ];
}

/** The passkey as the second step. @param {URLSearchParams} query */
function passkeySecondFactor(query) {
  const { button, error } = passkeyButton({}, async () => {
    const options = await api('POST', '/api/auth/login/second-factor/options');
    const passkey = await usePasskey(options?.options ?? options);
    await signedIn(await api('POST', '/api/auth/login/second-factor', { passkey }), query);
  });
  return h('div', { class: 'form' }, error, button);
}

/**
 * A "Use a passkey" button that runs `use` once at a time, busy meanwhile, and shows what went wrong above it.
 * @param {Record<string, string>} attributes
 * @param {() => Promise<void>} use
 */
function passkeyButton(attributes, use) {
  const error = h('div');
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--block', ...attributes }, 'Use a passkey'));
  button.addEventListener('click', async () => {
    if (button.getAttribute('aria-busy') === 'true') return;
    replace(error);
    button.setAttribute('aria-busy', 'true');
    button.disabled = true;
    try {
      await use();
    } catch (caught) {
      replace(error, alertBox('error', messageOf(caught)));
    } finally {
      button.removeAttribute('aria-busy');
      button.disabled = false;
    }
  });
  return { button, error };
}

export function signUpPage() {
  const name = field({ label: 'Your name', name: 'name', autocomplete: 'name', required: true, maxlength: 100 });
  const email = field({ label: 'Email address', name: 'email', type: 'email', autocomplete: 'email', required: true, hint: 'We send a link to confirm it.' });
  const password = field({ label: 'Password', name: 'password', type: 'password', autocomplete: 'new-password', required: true, ...PASSWORD_RULE });
  const { form } = simpleForm({
    label: 'Create your account',
    fields: [name.wrapper, email.wrapper, password.wrapper],
    submitLabel: 'Create account',
    block: true,
    onSubmit: async () => {
      const answer = await api('POST', '/api/auth/register', { name: name.input.value.trim(), email: email.input.value.trim(), password: password.input.value });
      setAccount(answer.account);
      setFlash({ kind: 'success', text: `Welcome, ${answer.account.name}. Your account is ready; we sent a confirmation link to ${answer.account.email}.` });
      await navigate('/');
    },
  });
  return [
    heading('Create your account'),
    h('p', { class: 'intro' }, 'Run machines for your AI agents and get signed events when they change.'),
    form,
    h('p', { class: 'auth__footer' }, 'Already have an account? ', h('a', { href: '/sign-in' }, 'Sign in')),
  ];
}

export function forgotPasswordPage() {
  const container = h('div');
  const email = field({ label: 'Email address', name: 'email', type: 'email', autocomplete: 'email', required: true });
  const { form } = simpleForm({
    label: 'Reset your password',
    fields: [email.wrapper],
    submitLabel: 'Send reset link',
    block: true,
    onSubmit: async () => {
      const address = email.input.value.trim();
      await api('POST', '/api/auth/forgot', { email: address });
      const title = heading('Check your email');
      replace(container,
        title,
        alertBox('success', `If an account exists for ${address}, we sent it a link to choose a new password. The link works once, for 1 hour.`),
        h('p', { class: 'auth__footer' }, 'No mail after a few minutes? Check the spam folder, or ', h('a', { href: '/forgot-password' }, 'send another link'), '.'));
      title.focus();
    },
  });
  replace(container,
    heading('Reset your password'),
    h('p', { class: 'intro' }, 'Enter the email address of your account and we will send you a link to choose a new password.'),
    form,
    h('p', { class: 'auth__footer' }, h('a', { href: '/sign-in' }, 'Back to sign in')));
  return container;
}

/** A link whose token is missing cannot work; say so instead of showing a form. @param {string} what */
function incompleteLink(what) {
  return [
    heading('This link is incomplete'),
    alertBox('error', `The ${what} link is missing its token. Open the link from the email again, or copy the whole address into the browser.`),
  ];
}

/** @param {PageContext} context */
export function resetPasswordPage({ query }) {
  const token = query.get('token');
  const footer = h('p', { class: 'auth__footer' }, 'Link expired or already used? ', h('a', { href: '/forgot-password' }, 'Request a new one'));
  if (!token) return [...incompleteLink('reset'), footer];
  const password = field({ label: 'New password', name: 'password', type: 'password', autocomplete: 'new-password', required: true, ...PASSWORD_RULE });
  const confirmation = field({ label: 'Repeat the new password', name: 'confirmation', type: 'password', autocomplete: 'new-password', required: true });
  mustMatch(password.input, confirmation.input);
  const container = h('div');
  const { form } = simpleForm({
    label: 'Choose a new password',
    fields: [password.wrapper, confirmation.wrapper],
    submitLabel: 'Set new password',
    block: true,
    onSubmit: async () => {
      const answer = await api('POST', '/api/auth/reset', { token, password: password.input.value });
      if (answer?.secondFactor?.required) {
        // A new password does not get past the second factor: the reset asks for it before it signs in.
        history.replaceState(null, '', location.pathname);
        setFlash({ kind: 'success', text: 'Your password is changed and every other session was signed out.' });
        replace(container, ...secondFactorStep(new URLSearchParams(), answer.secondFactor.methods ?? [], 'Your password is changed. To sign in, confirm it is you with your second factor.'));
        container.querySelector('h1')?.focus();
        return;
      }
      setAccount(answer.account);
      setFlash({ kind: 'success', text: 'Your password is changed and you are signed in. Every other session was signed out.' });
      // Replaces the entry that holds the used token: Back does not bring it up again.
      await navigate('/', { replace: true });
    },
  });
  replace(container,
    heading('Choose a new password'),
    h('p', { class: 'intro' }, 'Setting a new password signs out every other session of your account.'),
    form,
    footer);
  return container;
}

/**
 * Opening the link draws this page and nothing more: the token is sent only
 * when the person presses the button, because mail scanners open links too.
 * @param {PageContext} context
 */
export function verifyEmailPage({ query, account }) {
  const token = query.get('token');
  if (!token && account?.emailVerified) return confirmed(true);
  if (!token) return incompleteLink('confirmation');
  const container = h('div');
  const { form } = simpleForm({
    label: 'Confirm your email address',
    fields: [],
    submitLabel: 'Confirm email address',
    block: true,
    onSubmit: async () => {
      try {
        await api('POST', '/api/auth/verify', { token });
      } catch (error) {
        if (error instanceof ApiError && error.code === 'invalid_token') return showExpired(container, account, messageOf(error));
        throw error;
      }
      // The used token leaves the address bar and the history entry.
      history.replaceState(null, '', location.pathname);
      const signedIn = await loadAccount(true).catch(() => null);
      replace(container, ...confirmed(signedIn !== null));
      container.querySelector('h1')?.focus();
    },
  });
  replace(container,
    heading('Confirm your email address'),
    h('p', { class: 'intro' }, account
      ? `Confirm that ${account.email} is your address to finish setting up your account.`
      : 'Confirm your address to finish setting up your account.'),
    form);
  return container;
}

/** @param {boolean} signedIn */
function confirmed(signedIn) {
  return [
    heading('Email address confirmed'),
    alertBox('success', 'Thank you: your email address is confirmed.'),
    h('div', { class: 'mt-3' }, signedIn
      ? h('a', { class: 'btn btn--primary btn--block', href: '/' }, 'Continue to the dashboard')
      : h('a', { class: 'btn btn--primary btn--block', href: '/sign-in' }, 'Sign in')),
  ];
}

/**
 * @param {HTMLElement} container
 * @param {import('../session.js').Account | null} account
 * @param {string} detail
 */
function showExpired(container, account, detail) {
  const title = heading('This link no longer works');
  const next = h('div', { class: 'mt-3' });
  if (account && !account.emailVerified) {
    const resend = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary btn--block' }, 'Send a new confirmation link'));
    resend.addEventListener('click', async () => {
      resend.disabled = true;
      try {
        await api('POST', '/api/me/verify-email');
        replace(next, alertBox('success', `We sent a new link to ${account.email}.`));
      } catch (error) {
        replace(next, alertBox('error', messageOf(error)), resend);
        resend.disabled = false;
      }
    });
    next.append(resend);
  } else if (account) {
    next.append(h('a', { class: 'btn btn--primary btn--block', href: '/' }, 'Go to the dashboard'));
  } else {
    next.append(h('p', { class: 'auth__footer' }, h('a', { href: '/sign-in' }, 'Sign in'), ' to request a new confirmation link.'));
  }
  replace(container, title, alertBox('error', detail), next);
  title.focus();
}
