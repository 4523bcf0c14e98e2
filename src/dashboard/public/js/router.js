// The client-side router: one HTML shell for every path (the server answers
// each one with it), this table decides what to draw.
import { api, SESSION_ENDED } from './api.js';
import { closeAllDialogs } from './dialog.js';
import { alertBox, append, h, replace } from './dom.js';
import { appLayout, authLayout } from './layout.js';
import { navigate, onNavigate, setFlash, takeFlash } from './navigation.js';
import { ROUTES } from './routes.js';
import { currentAccount, loadAccount, setAccount } from './session.js';

/** @typedef {import('./routes.js').Route} Route */

/**
 * @param {string} pathname
 * @returns {{ route: Route, params: Record<string, string> } | null}
 */
export function matchRoute(pathname) {
  const parts = pathname.split('/').filter(Boolean);
  for (const route of ROUTES) {
    const pattern = route.path.split('/').filter(Boolean);
    if (pattern.length !== parts.length) continue;
    /** @type {Record<string, string>} */
    const params = {};
    const matches = pattern.every((segment, index) => {
      const part = parts[index] ?? '';
      if (segment.startsWith(':')) {
        params[segment.slice(1)] = decodeURIComponent(part);
        return true;
      }
      return segment === part;
    });
    if (matches) return { route, params };
  }
  return null;
}

const app = /** @type {HTMLElement} */ (document.getElementById('app'));
/** @type {Array<() => void>} */
let cleanups = [];
let renderCount = 0;

async function render() {
  const ticket = ++renderCount;
  for (const cleanup of cleanups) cleanup();
  cleanups = [];
  closeAllDialogs();

  const url = new URL(location.href);
  const match = matchRoute(url.pathname);
  let account;
  try {
    account = await loadAccount();
  } catch {
    account = null;
  }
  if (ticket !== renderCount) return;

  if (match?.route.redirect) return navigate(match.route.redirect(account), { replace: true });
  if (match?.route.access === 'guest' && account) return navigate('/', { replace: true });
  if (match?.route.access === 'user' && !account) {
    return navigate(`/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`, { replace: true });
  }

  const route = match?.route ?? null;
  const inApp = route ? route.access === 'user' : account !== null;
  const main = h('main', { id: 'main', class: inApp ? `page${route?.narrow ? ' page--narrow' : ''}` : 'auth__card', tabindex: '-1' });
  const flash = takeFlash();
  if (flash) main.append(alertBox(flash.kind, flash.text, { class: `alert alert--${flash.kind} flash` }));

  /** @type {import('./routes.js').PageContext} */
  const context = {
    params: match?.params ?? {},
    query: url.searchParams,
    path: url.pathname,
    account,
    onCleanup: (cleanup) => cleanups.push(cleanup),
    refreshChrome: () => render(),
  };
  const content = route?.page ? route.page(context) : notFound(inApp);
  append(main, [content]);

  const title = route?.title ?? 'Page not found';
  document.title = `${title} · Machine Platform`;
  replace(app, ...(inApp && account ? appLayout({ account, path: url.pathname, main, onSignOut: signOut }) : authLayout(main)));
  app.removeAttribute('aria-busy');
  // A link to a part of a page (`/billing#card`) lands on that part's heading; any other on the page's h1.
  const part = url.hash ? document.getElementById(url.hash.slice(1)) : null;
  const landing = part?.querySelector('h2[tabindex="-1"]');
  if (landing instanceof HTMLElement) landing.focus();
  else if (ticket > 1) (main.querySelector('h1') ?? main).focus();
}

/** @param {boolean} inApp */
function notFound(inApp) {
  return h('div', { class: inApp ? 'empty' : '' },
    h('h1', { tabindex: '-1' }, 'Page not found'),
    h('p', { class: inApp ? '' : 'intro' }, 'There is nothing at this address. Check the link, or go back to the dashboard.'),
    h('a', { class: 'btn btn--primary', href: '/' }, 'Go to the dashboard'));
}

async function signOut() {
  try {
    await api('POST', '/api/auth/logout');
  } finally {
    setAccount(null);
    setFlash({ kind: 'success', text: 'You are signed out.' });
    await navigate('/sign-in');
  }
}

/** @param {MouseEvent} event */
function followLink(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = event.target instanceof Element ? event.target.closest('a[href]') : null;
  if (!(anchor instanceof HTMLAnchorElement) || anchor.target || anchor.hasAttribute('download')) return;
  const url = new URL(anchor.href);
  if (url.origin !== location.origin || !matchRoute(url.pathname)) return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return;
  event.preventDefault();
  navigate(url.pathname + url.search + url.hash);
}

export function startRouter() {
  onNavigate(render);
  document.addEventListener('click', followLink);
  window.addEventListener('popstate', () => render());
  window.addEventListener(SESSION_ENDED, () => {
    if (currentAccount() === null) return;
    setAccount(null);
    setFlash({ kind: 'info', text: 'Your session has ended. Sign in again to continue.' });
    navigate(`/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`, { replace: true });
  });
  return render();
}
