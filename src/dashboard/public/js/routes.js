// Every page of the dashboard. The server answers the same paths with the
// HTML shell (PAGE_PATHS in src/dashboard/dashboard.routes.ts): keep both in step.
import { accountPage } from './pages/account.js';
import { eventsPage } from './pages/events.js';
import { apiKeysPage } from './pages/api-keys.js';
import { billingPage } from './pages/billing.js';
import { applicationsPage } from './pages/applications.js';
import { consentPage } from './pages/consent.js';
import { forgotPasswordPage, resetPasswordPage, signInPage, signUpPage, verifyEmailPage } from './pages/auth.js';
import { machinePage } from './pages/machine.js';
import { machinesPage } from './pages/machines.js';
import { securityPage } from './pages/security.js';
import { sessionsPage } from './pages/sessions.js';
import { webhookPage } from './pages/webhook.js';
import { webhooksPage } from './pages/webhooks.js';

/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./session.js').Account} Account */

/**
 * @typedef {object} PageContext
 * @property {Record<string, string>} params
 * @property {URLSearchParams} query
 * @property {string} path
 * @property {Account | null} account
 * @property {(cleanup: () => void) => void} onCleanup  runs when the page is left (timers)
 * @property {() => Promise<void>} refreshChrome  draws the page again (after the account changed)
 */

/**
 * @typedef {object} Route
 * @property {string} path
 * @property {'guest' | 'public' | 'user'} [access]  guest: signed-out only; user: signed-in only
 * @property {string} [title]
 * @property {boolean} [narrow]
 * @property {(context: PageContext) => Child} [page]
 * @property {(account: Account | null) => string} [redirect]
 */

/** @type {Route[]} */
export const ROUTES = [
  { path: '/', redirect: (account) => (account ? '/machines' : '/sign-in') },
  { path: '/sign-in', access: 'guest', title: 'Sign in', page: signInPage },
  { path: '/sign-up', access: 'guest', title: 'Create your account', page: signUpPage },
  { path: '/forgot-password', access: 'public', title: 'Reset your password', page: forgotPasswordPage },
  { path: '/reset-password', access: 'public', title: 'Choose a new password', page: resetPasswordPage },
  { path: '/verify-email', access: 'public', title: 'Confirm your email address', page: verifyEmailPage },
  { path: '/account', access: 'user', title: 'Account', narrow: true, page: accountPage },
  { path: '/account/security', access: 'user', title: 'Security', narrow: true, page: securityPage },
  { path: '/account/sessions', access: 'user', title: 'Sessions', narrow: true, page: sessionsPage },
  { path: '/account/api-keys', access: 'user', title: 'API keys', narrow: true, page: apiKeysPage },
  { path: '/account/applications', access: 'user', title: 'Connected applications', narrow: true, page: applicationsPage },
  { path: '/oauth/consent', access: 'user', title: 'Connect an application', narrow: true, page: consentPage },
  { path: '/event-webhooks', access: 'user', title: 'Event webhooks', page: webhooksPage },
  { path: '/event-webhooks/:id', access: 'user', title: 'Event webhook endpoint', page: webhookPage },
  { path: '/machines', access: 'user', title: 'Machines', page: machinesPage },
  { path: '/machines/:id', access: 'user', title: 'Machine', page: machinePage },
  { path: '/billing', access: 'user', title: 'Billing', page: billingPage },
  { path: '/events', access: 'user', title: 'Events', page: eventsPage },
];
