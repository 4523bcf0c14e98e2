// Where the account is signed in, and signing any of those sessions out.
import { api, listAll, messageOf } from '../api.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { describeUserAgent, timeElement } from '../format.js';
import { accountNav, card, pageHeader } from '../layout.js';
import { navigate, setFlash } from '../navigation.js';
import { setAccount } from '../session.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {{ id: string, createdAt: string, lastSeenAt: string, userAgent: string | null, current: boolean }} Session */

/** @param {PageContext} context */
export function sessionsPage({ path }) {
  const body = h('div', null, loading('Loading sessions…'));
  const section = card({ title: 'Signed-in sessions', id: 'sessions', flush: true, description: 'Each browser where you are signed in. Sign out any you do not recognise, then change your password.' }, body);

  async function refresh() {
    try {
      /** @type {Session[]} */
      const sessions = await listAll('/api/me/sessions');
      sessions.sort((a, b) => Number(b.current) - Number(a.current) || b.lastSeenAt.localeCompare(a.lastSeenAt));
      replace(body, table('Signed-in sessions', ['Device', 'Signed in', 'Last active', ''], sessions.map(row)));
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  /** @param {Session} session */
  function row(session) {
    const signOut = /** @type {HTMLButtonElement} */ (h('button', {
      type: 'button', class: 'btn btn--small btn--danger-outline',
      'aria-label': session.current ? 'Sign out of this session' : `Sign out ${describeUserAgent(session.userAgent)}, last active ${timeElement(session.lastSeenAt).textContent}`,
    }, 'Sign out'));
    signOut.addEventListener('click', async () => {
      signOut.disabled = true;
      try {
        await api('DELETE', `/api/me/sessions/${encodeURIComponent(session.id)}`);
        if (session.current) {
          setAccount(null);
          setFlash({ kind: 'success', text: 'You are signed out.' });
          await navigate('/sign-in');
          return;
        }
        toast('Session signed out.');
        await refresh();
        section.querySelector('h2')?.focus();
      } catch (error) {
        signOut.disabled = false;
        toast(messageOf(error), 'error');
      }
    });
    return h('tr', { dataset: { sessionId: session.id } },
      h('td', { class: 'table__main' },
        h('div', { class: 'table__primary' }, describeUserAgent(session.userAgent), ' ', session.current ? badge('This session', 'info', { plain: true }) : null),
        h('div', { class: 'table__secondary truncate', title: session.userAgent ?? '' }, session.userAgent ?? 'No browser information')),
      cell('Signed in', timeElement(session.createdAt)),
      cell('Last active', timeElement(session.lastSeenAt)),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, signOut)));
  }

  refresh();
  return [pageHeader({ title: 'Account', description: 'Your profile, sign-in and API access.' }), accountNav(path), section];
}
