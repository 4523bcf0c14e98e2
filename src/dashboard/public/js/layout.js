// The two frames every page sits in: the signed-in app (top bar, navigation,
// confirmation banner) and the centred card of the sign-in pages.
import { api, itemsOf, messageOf } from './api.js';
import { loadBilling, nextPaymentStep, watchBilling } from './billing-status.js';
import { h, replace } from './dom.js';
import { toast } from './toast.js';

/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./session.js').Account} Account */

/** Where a signed-in person lands: the machines, with the getting-started checklist while the account is new. */
export const HOME = '/machines';

const NAV = [
  { href: '/machines', label: 'Machines' },
  { href: '/event-webhooks', label: 'Event webhooks' },
  { href: '/billing', label: 'Billing' },
  { href: '/account', label: 'Account' },
];

function brand() {
  return h('a', { class: 'brand', href: '/' }, h('img', { src: '/assets/logo.svg', alt: '', width: 28, height: 28 }), h('span', null, 'Machine Platform'));
}

function skipLink() {
  return h('a', { class: 'skip-link', href: '#main' }, 'Skip to content');
}

/**
 * @param {{ account: Account, path: string, main: HTMLElement, onSignOut: () => Promise<void> }} options
 */
export function appLayout({ account, path, main, onSignOut }) {
  const signOut = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Sign out'));
  signOut.addEventListener('click', async () => {
    signOut.disabled = true;
    try {
      await onSignOut();
    } finally {
      signOut.disabled = false;
    }
  });
  return [
    skipLink(),
    h('header', { class: 'topbar' },
      h('div', { class: 'topbar__inner' },
        brand(),
        h('nav', { class: 'nav', 'aria-label': 'Main' },
          NAV.map((item) => h('a', { href: item.href, 'aria-current': path === item.href || path.startsWith(`${item.href}/`) ? 'page' : undefined }, item.label))),
        h('div', { class: 'usermenu' },
          h('span', { class: 'usermenu__email', title: account.email }, account.email),
          signOut))),
    // On /account the Profile card offers the same button beside the address, on home the checklist's
    // "Send the link again": one is enough.
    account.emailVerified ? null : confirmationBanner(account, path !== '/account' && path !== HOME),
    balanceBanner(path),
    main,
  ];
}

/**
 * Shown on every page while the address is unconfirmed.
 * @param {Account} account
 * @param {boolean} withResend
 */
function confirmationBanner(account, withResend) {
  const resend = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Resend confirmation email'));
  const text = h('span', { class: 'banner__text' },
    h('strong', null, 'Confirm your email address. '),
    `We sent a link to ${account.email}. Open it to confirm the address.`);
  resend.addEventListener('click', async () => {
    resend.disabled = true;
    try {
      await api('POST', '/api/me/verify-email');
      replace(text, h('strong', null, 'Confirmation email sent. '), `Check the inbox of ${account.email}; the link works for 24 hours.`);
      toast('Confirmation email sent.');
    } catch (error) {
      toast(messageOf(error), 'error');
    } finally {
      resend.disabled = false;
    }
  });
  return h('div', { class: 'banner', role: 'region', 'aria-label': 'Email confirmation', id: 'confirmation-banner' },
    h('div', { class: 'banner__inner' }, text, withResend ? resend : null));
}

/**
 * Shown on every page when billing is on and machines cannot run or soon
 * will not: drawn once the balance is known, nothing until then, and drawn
 * again at every later read of it (a card saved, a top-up), so it goes as
 * soon as the page shows a balance. It says only what is true of this
 * account: a new one is told its next step (nothing of it was ever stopped;
 * on home the checklist says it), one whose money ran out that its machines
 * stopped (when machine time is what emptied it).
 * @param {string} path
 */
function balanceBanner(path) {
  const slot = h('div', { hidden: true });
  let reads = 0;
  watchBilling((status) => {
    const read = ++reads;
    balanceBannerText(status, path).then((text) => {
      // A later read answered first: it is the one that holds.
      if (read !== reads) return;
      slot.hidden = text === null;
      if (text === null) return replace(slot);
      replace(slot, h('div', { class: text.urgent ? 'banner banner--billing' : 'banner', role: 'region', 'aria-label': 'Balance', id: 'balance-banner' },
        h('div', { class: 'banner__inner' }, h('span', { class: 'banner__text' }, ...text.children, h('a', { href: '/billing' }, 'Go to Billing')))));
    }).catch(() => {});
  });
  loadBilling().catch(() => {});
  return slot;
}

/**
 * What the balance banner says for this balance, or null for no banner.
 * @param {import('./billing-status.js').BillingStatus} status
 * @param {string} path
 * @returns {Promise<{ children: Child[], urgent: boolean } | null>}
 */
async function balanceBannerText({ billing, settings }, path) {
  if (!settings.enabled) return null;
  const step = nextPaymentStep(billing, settings);
  if (step !== null) {
    const [newest] = itemsOf(await api('GET', '/api/billing/transactions?limit=1'));
    if (newest === undefined) {
      // A new account: nothing ran out, nothing was stopped; it has a step to take (home lists them all).
      if (path === HOME) return null;
      return { children: [h('strong', null, 'Machines need a balance. '), `${step.text} `], urgent: false };
    }
    // Machine time emptied it: enforcement stopped what was running.
    const stopped = newest.kind === 'usage' ? ', and the machines that were running stopped when it ran out' : '';
    return { children: [h('strong', null, 'Your balance is empty. '), `Machines cannot be created or started${stopped}. ${step.text} `], urgent: true };
  }
  if (Number(billing.balance) < Number(settings.lowBalance)) {
    return { children: [h('strong', null, 'Your balance is low. '), 'Running machines stop when it reaches zero. '], urgent: true };
  }
  return null;
}

/** @param {HTMLElement} main */
export function authLayout(main) {
  return [skipLink(), h('div', { class: 'auth' }, brand(), main)];
}

/**
 * The heading block of an app page. The h1 takes focus after navigation.
 * `oneLine`: for a title people chose (any length), cut with an ellipsis; the whole of it shows on hover.
 * @param {{ title: string, description?: Child, actions?: Child[], breadcrumb?: { href: string, label: string }, oneLine?: boolean }} options
 */
export function pageHeader({ title, description, actions, breadcrumb, oneLine = false }) {
  return h('div', { class: 'page-header' },
    h('div', { class: 'page-header__text' },
      breadcrumb ? h('nav', { class: 'breadcrumb', 'aria-label': 'Breadcrumb' }, h('a', { href: breadcrumb.href }, `← ${breadcrumb.label}`)) : null,
      h('h1', { tabindex: '-1', class: oneLine ? 'one-line' : undefined, title: oneLine ? title : undefined }, title),
      description ? h('p', null, description) : null),
    actions && actions.length > 0 ? h('div', { class: 'page-header__actions' }, actions) : null);
}

const ACCOUNT_SECTIONS = [
  { href: '/account', label: 'Profile' },
  { href: '/account/security', label: 'Security' },
  { href: '/account/sessions', label: 'Sessions' },
  { href: '/account/api-keys', label: 'API keys' },
  { href: '/account/applications', label: 'Connected applications' },
];

/** @param {string} path */
export function accountNav(path) {
  return h('nav', { class: 'subnav', 'aria-label': 'Account' },
    ACCOUNT_SECTIONS.map((item) => h('a', { href: item.href, 'aria-current': item.href === path ? 'page' : undefined }, item.label)));
}

/**
 * @param {{ title: string, description?: Child, actions?: Child[], flush?: boolean, danger?: boolean, id?: string }} options
 * @param {...Child} children
 */
export function card({ title, description, actions, flush = false, danger = false, id }, ...children) {
  const headingId = id ? `${id}-title` : undefined;
  return h('section', { class: `card${flush ? ' card--flush' : ''}${danger ? ' card--danger' : ''}`, id, 'aria-labelledby': headingId },
    h('div', { class: 'card__header' },
      h('div', null, h('h2', { id: headingId, tabindex: '-1' }, title), description ? h('p', null, description) : null),
      actions && actions.length > 0 ? h('div', { class: 'actions' }, actions) : null),
    ...children);
}
