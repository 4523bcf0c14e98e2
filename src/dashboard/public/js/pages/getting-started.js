// The checklist a new account sees at home (the Machines page): confirm the
// address, add a card, an API key, an endpoint, a first machine. Each step
// links to where it is done and ticks itself off from what the API says; the
// checklist goes away once every step is done.
import { api, itemsOf, messageOf } from '../api.js';
import { loadBilling } from '../billing-status.js';
import { badge, h, replace } from '../dom.js';
import { card } from '../layout.js';
import { usd } from '../money.js';
import { setAccount } from '../session.js';
import { toast } from '../toast.js';

/** @typedef {import('../dom.js').Child} Child */
/** @typedef {import('../session.js').Account} Account */
/**
 * How the service sends mail (GET /api/dashboard/mail): into a folder of files, which the checklist names, or by SMTP.
 * @typedef {{ delivery: 'files', folder: string } | { delivery: 'smtp' }} MailDelivery
 */
/** @typedef {{ me: Account, billing: Awaited<ReturnType<typeof loadBilling>> | null, mail: MailDelivery | null, keys: number, endpoints: number }} Facts */

/**
 * @typedef {object} Step
 * @property {string} id
 * @property {string} title
 * @property {boolean} done
 * @property {Child} hint
 * @property {HTMLElement} action  a link to where the step is done, or a button that does it
 */

/**
 * @param {{ account: Account | null, onCreateMachine: () => void, refreshChrome: () => Promise<void> }} options
 * @returns {{ element: HTMLElement, setMachineCount: (count: number) => void }}
 */
export function gettingStarted({ account, onCreateMachine, refreshChrome }) {
  const element = h('div', { hidden: true });
  /** @type {Facts | null} */
  let facts = null;
  /** @type {number | null} */
  let machines = null;
  /** What is drawn, so that the machines list's polling redraws nothing (and moves no focus) until a step changes. */
  let drawn = '';

  Promise.all([
    api('GET', '/api/me'),
    loadBilling().catch(() => null),
    api('GET', '/api/dashboard/mail').catch(() => null),
    api('GET', '/api/keys?limit=1'),
    api('GET', '/api/event-webhooks?limit=1'),
  ]).then(([me, billing, mail, keys, endpoints]) => {
    facts = { me: me.account, billing, mail, keys: itemsOf(keys).length, endpoints: itemsOf(endpoints).length };
    // Confirmed in another tab since this one asked: the banner asking for it goes too.
    if (account && me.account.emailVerified !== account.emailVerified) {
      setAccount(me.account);
      refreshChrome();
      return;
    }
    draw();
  }, () => {});

  function draw() {
    if (facts === null || machines === null) return;
    const steps = stepsOf(facts, machines, onCreateMachine);
    const state = steps.map((step) => `${step.id}:${step.done}`).join(' ');
    if (state === drawn) return;
    drawn = state;
    const open = steps.filter((step) => !step.done);
    element.hidden = open.length === 0;
    if (open.length === 0) return replace(element);
    const next = open[0];
    replace(element, card({
      title: 'Get started',
      id: 'get-started',
      description: `${steps.length - open.length} of ${steps.length} done. From a new account to a running machine whose events reach your receiver.`,
    }, h('ol', { class: 'steps', 'aria-label': 'Getting started' }, steps.map((step) =>
      h('li', { class: `steps__item${step.done ? ' steps__item--done' : ''}${step === next ? ' steps__item--next' : ''}`, dataset: { step: step.id, done: String(step.done) } },
        h('div', { class: 'steps__text' },
          h('div', { class: 'steps__title' }, step.title, ' ', step.done ? badge('Done', 'success') : step === next ? badge('Next', 'info') : badge('To do', 'neutral')),
          step.done ? null : h('p', { class: 'steps__hint' }, step.hint)),
        step.done ? null : h('div', { class: 'steps__action' }, primary(step.action, step === next)))))));
  }

  return {
    element,
    setMachineCount(count) {
      machines = count;
      draw();
    },
  };
}

/** The next step's action is the page's main call to action. @param {HTMLElement} action @param {boolean} isNext */
function primary(action, isNext) {
  action.className = `btn btn--small${isNext ? ' btn--primary' : ''}`;
  return action;
}

/**
 * @param {Facts} facts
 * @param {number} machines
 * @param {() => void} onCreateMachine
 * @returns {Step[]}
 */
function stepsOf({ me, billing, mail, keys, endpoints }, machines, onCreateMachine) {
  /** @type {Step[]} */
  const steps = [{
    id: 'email',
    title: 'Confirm your email address',
    done: me.emailVerified,
    hint: confirmationHint(me.email, mail),
    action: resendButton(),
  }];
  if (billing?.settings.enabled) {
    const { welcomeCredit, paymentMethod } = billing.billing;
    steps.push({
      id: 'card',
      title: 'Add a card',
      done: paymentMethod !== null || welcomeCredit.grantedAt !== null,
      hint: [
        billing.settings.testMode ? 'Test mode: the card 4242 4242 4242 4242 is accepted and never charged. ' : '',
        Number(welcomeCredit.amount) > 0 ? `With a confirmed address and a card, your ${usd(welcomeCredit.amount)} welcome credit arrives: machines run from your balance.` : 'Machines run from your balance: top up with the card.',
      ].join(''),
      action: h('a', { href: '/billing#card' }, 'Add a card'),
    });
  }
  steps.push(
    {
      id: 'api-key',
      title: 'Create an API key',
      done: keys > 0,
      hint: 'For your scripts and agents: the API and the platform MCP take it as "Authorization: Bearer tmk_…".',
      action: h('a', { href: '/account/api-keys' }, 'Create an API key'),
    },
    {
      id: 'endpoint',
      title: 'Add an event webhook endpoint',
      done: endpoints > 0,
      hint: 'Your HTTPS receiver gets a signed event whenever a machine or run changes, so you never poll. A receiver on this machine: see “Receive webhooks locally” in docs/webhooks.md.',
      action: h('a', { href: '/event-webhooks' }, 'Add an endpoint'),
    },
    {
      id: 'machine',
      title: 'Create your first machine',
      done: machines > 0,
      hint: 'It boots in a few seconds, and its machine.created event goes to your endpoint.',
      action: h('button', { type: 'button', onclick: onCreateMachine }, 'Create your first machine'),
    },
  );
  return steps;
}

/**
 * Where the confirmation mail is: the folder this service writes mail into
 * when it has no mail server (its MAIL_DIR), else simply the inbox.
 * @param {string} email
 * @param {MailDelivery | null} mail
 * @returns {Child}
 */
function confirmationHint(email, mail) {
  const sent = `Open the link in the mail we sent to ${email}.`;
  if (mail?.delivery !== 'files') return sent;
  return [`${sent} This service has no mail server: it writes each mail as a file into its mail folder, `, h('code', { 'data-mail-folder': '' }, mail.folder), ' (one .eml file per mail).'];
}

function resendButton() {
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button' }, 'Send the link again'));
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      await api('POST', '/api/me/verify-email');
      toast('Confirmation email sent.');
    } catch (error) {
      toast(messageOf(error), 'error');
    } finally {
      button.disabled = false;
    }
  });
  return button;
}
