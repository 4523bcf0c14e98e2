// Billing: the balance, the welcome-credit checklist, the card (test mode),
// top-ups, the statement (a line per machine per day, and each credit) and
// the usage by machine.
import { api, messageOf, pagedList } from '../api.js';
import { isEmpty, loadBilling } from '../billing-status.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { formatDate } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card, pageHeader } from '../layout.js';
import { money, pricePerHour, usd } from '../money.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('../billing-status.js').Billing} Billing */
/** @typedef {import('../billing-status.js').BillingSettings} BillingSettings */
/** @typedef {{ id: string, kind: string, amount: string, balanceAfter: string, machineId: string | null, createdAt: string }} Transaction */
/**
 * @typedef {object} StatementLine
 * @property {string} id
 * @property {string} day  YYYY-MM-DD, UTC
 * @property {string} kind
 * @property {string} amount
 * @property {{ id: string, name: string | null, size: string | null } | null} machine
 * @property {number | null} seconds
 * @property {Transaction | null} transaction
 */

const STATEMENT_PAGE = 50;
const utcDay = new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeZone: 'UTC' });

const KIND_LABELS = { welcome_credit: 'Welcome credit', top_up: 'Top-up', usage: 'Machine time' };

/** @param {number} seconds */
function duration(seconds) {
  const whole = Math.round(seconds);
  const hours = Math.floor(whole / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const rest = whole % 60;
  if (hours > 0) return `${hours} h ${minutes} min`;
  if (minutes > 0) return `${minutes} min ${rest} s`;
  return `${rest} s`;
}

/** @param {PageContext} context */
export function billingPage({ account }) {
  const summary = h('div', null, loading('Loading billing…'));
  const cardSlot = h('div', null, loading('Loading the card…'));
  const statementBody = h('div', null, loading('Loading the statement…'));
  const statementFooter = h('div');
  const usage = h('div', null, loading('Loading usage…'));
  /** @type {ReturnType<typeof pagedList<StatementLine>>} */
  const statement = pagedList((cursor) => api('GET', `/api/billing/statement?${new URLSearchParams({ limit: String(STATEMENT_PAGE), ...(cursor ? { cursor } : {}) })}`));

  function drawStatement() {
    replace(statementBody, statement.shown.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'Nothing yet'), h('p', null, 'The welcome credit, top-ups and machine time appear here.'))
      : table('Statement', ['Line', 'Day', 'Amount'], statement.shown.map(statementRow)));
    replace(statementFooter, statement.nextCursor
      ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadOlderLines }, 'Load older lines'))
      : null);
  }

  async function loadOlderLines() {
    try {
      await statement.more();
      drawStatement();
    } catch (error) {
      toast(messageOf(error), 'error');
    }
  }

  async function refresh() {
    try {
      const { billing, settings } = await loadBilling();
      replace(summary, ...summaryContent(billing, settings, Boolean(account?.emailVerified)));
      replace(cardSlot, ...cardContent(billing, settings, refresh));
    } catch (error) {
      replace(summary, alertBox('error', messageOf(error)));
      replace(cardSlot);
    }
    try {
      /** @type {{ total: string, machines: Array<{ machineId: string, name: string | null, size: string | null, seconds: number, amount: string }> }} */
      const answer = await api('GET', '/api/billing/usage');
      replace(usage, answer.machines.length === 0
        ? h('div', { class: 'empty' }, h('h3', null, 'No machine time in the last 30 days'), h('p', null, 'Running machines are charged per millisecond.'))
        : [
            table('Usage by machine', ['Machine', 'Running time', 'Amount'], answer.machines.map((machine) =>
              h('tr', { dataset: { machineId: machine.machineId } },
                h('td', { class: 'table__main' },
                  h('div', { class: 'table__primary' }, machine.name ?? machine.machineId, ' ', machine.size ? h('span', { class: 'badge badge--neutral badge--plain' }, machine.size) : null),
                  h('div', { class: 'table__secondary mono' }, machine.machineId)),
                cell('Running time', duration(machine.seconds)),
                cell('Amount', money(machine.amount))))),
            h('div', { class: 'card__footer' }, h('span', null, 'Total: ', h('strong', { 'data-usage-total': '' }, money(answer.total)))),
          ]);
    } catch (error) {
      replace(usage, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
    try {
      await statement.read();
      drawStatement();
    } catch (error) {
      replace(statementBody, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  refresh();
  return [
    pageHeader({ title: 'Billing', description: 'Machine time is metered per millisecond while machines run, and paid from your balance.' }),
    h('div', { class: 'stack' },
      card({ title: 'Balance', id: 'balance' }, summary),
      card({ title: 'Card and top-up', id: 'card' }, cardSlot),
      card({ title: 'Usage by machine', id: 'usage', flush: true, description: 'The last 30 days.' }, usage),
      card({
        title: 'Statement',
        id: 'statement',
        flush: true,
        description: 'Machine time adds up to one line per machine per day (UTC); each credit and top-up is a line. Hover an amount for the exact figure.',
      }, statementBody, statementFooter)),
  ];
}

/**
 * @param {Billing} billing
 * @param {BillingSettings} settings
 * @param {boolean} emailConfirmed
 */
function summaryContent(billing, settings, emailConfirmed) {
  const { welcomeCredit, prices } = billing;
  const priceList = Object.entries(prices).map(([size, price]) => `${size} ${pricePerHour(price)}`).join(' · ');
  // A service older than pause sends no paused prices.
  const pausedList = Object.entries(billing.pausedPrices ?? {}).map(([size, price]) => `${size} ${pricePerHour(price)}`).join(' · ');
  /** @param {boolean} done @param {string} text */
  const step = (done, text) => h('li', { class: done ? 'checklist__done' : undefined }, badge(done ? 'Done' : 'To do', done ? 'success' : 'neutral'), ' ', text);
  const empty = isEmpty(billing.balance);
  return [
    settings.enabled ? null : alertBox('info', 'Billing is off on this service: machines are free.'),
    h('dl', { class: 'kv' },
      h('dt', null, 'Balance'), h('dd', null, h('strong', { class: 'balance', 'data-balance': billing.balance }, money(billing.balance)),
        settings.enabled && empty ? badge('Empty', 'danger') : settings.enabled && Number(billing.balance) < Number(settings.lowBalance) ? badge('Low', 'warning') : null),
      h('dt', null, 'Prices per hour'), h('dd', null, priceList),
      pausedList === '' ? null : h('dt', null, 'Paused, per hour'), pausedList === '' ? null : h('dd', null, pausedList)),
    welcomeCredit.grantedAt
      ? alertBox('success', `Your welcome credit of ${usd(welcomeCredit.amount)} arrived ${formatDate(welcomeCredit.grantedAt)}.`, { class: 'alert alert--success mt-3', 'data-welcome': 'granted' })
      : h('div', { class: 'mt-3', 'data-welcome': 'pending' },
          h('p', null, `Get a welcome credit of ${usd(welcomeCredit.amount)}: `),
          h('ul', { class: 'checklist', 'aria-label': 'Welcome credit checklist' },
            step(emailConfirmed || !welcomeCredit.missing.includes('email_confirmation'), 'Confirm your email address'),
            step(!welcomeCredit.missing.includes('payment_method'), 'Add a card'))),
    settings.enabled && empty ? h('p', { class: 'mt-3' }, 'Machines can run once the balance is above zero: finish the checklist for the welcome credit, or top up.') : null,
  ];
}

/**
 * @param {Billing} billing
 * @param {BillingSettings} settings
 * @param {() => Promise<void>} refresh
 */
function cardContent(billing, settings, refresh) {
  const saved = billing.paymentMethod;
  const remove = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small btn--danger-outline' }, 'Remove card'));
  remove.addEventListener('click', async () => {
    remove.disabled = true;
    try {
      await api('DELETE', '/api/billing/payment-method');
      toast('Card removed.');
      await refresh();
    } catch (error) {
      remove.disabled = false;
      toast(messageOf(error), 'error');
    }
  });

  const number = field({ label: 'Card number', name: 'number', autocomplete: 'cc-number', inputmode: 'numeric', required: true, maxlength: 23, mono: true, placeholder: '4242 4242 4242 4242' });
  const month = field({ label: 'Expiry month', name: 'expMonth', autocomplete: 'cc-exp-month', inputmode: 'numeric', required: true, maxlength: 2, placeholder: 'MM' });
  const year = field({ label: 'Expiry year', name: 'expYear', autocomplete: 'cc-exp-year', inputmode: 'numeric', required: true, maxlength: 4, minlength: 4, placeholder: 'YYYY' });
  const cvc = field({ label: 'CVC', name: 'cvc', autocomplete: 'cc-csc', inputmode: 'numeric', required: true, maxlength: 4, minlength: 3, placeholder: '123' });
  const { form } = simpleForm({
    label: saved ? 'Replace card' : 'Add card',
    fields: [
      settings.testMode
        ? alertBox('info', h('span', null, h('strong', null, 'Test mode: '), 'no real card is charged. Use 4242 4242 4242 4242 (Visa) or 5555 5555 5555 4444 (Mastercard) with any future expiry and any 3-digit CVC.'), { 'data-test-mode': '' })
        : null,
      number.wrapper,
      h('div', { class: 'form-row' }, month.wrapper, year.wrapper),
      cvc.wrapper,
    ],
    submitLabel: saved ? 'Replace card' : 'Save card',
    onSubmit: async () => {
      const body = { number: number.input.value.replace(/[\s-]/g, ''), expMonth: Number(month.input.value), expYear: Number(year.input.value), cvc: cvc.input.value.trim() };
      const result = await api('PUT', '/api/billing/payment-method', body);
      // The number and cvc leave the page with the form.
      form.reset();
      toast(`${brandName(result.brand)} ending ${result.last4} saved.`);
      await refresh();
    },
  });

  // One key per top-up the person means: a retried submit (a lost answer) charges once.
  let idempotencyKey = crypto.randomUUID();
  const amount = field({ label: 'Amount (USD)', name: 'amount', inputmode: 'decimal', required: true, placeholder: '20.00', hint: 'From $5.00 to $1,000.00, charged to your card.' });
  amount.input.addEventListener('input', () => (idempotencyKey = crypto.randomUUID()));
  const topUp = simpleForm({
    label: 'Top up',
    fields: [amount.wrapper],
    submitLabel: 'Top up',
    onSubmit: async () => {
      const result = await api('POST', '/api/billing/top-ups', { amount: amount.input.value.trim() }, { 'idempotency-key': idempotencyKey });
      idempotencyKey = crypto.randomUUID();
      amount.input.value = '';
      toast(`${usd(result.amount)} added. Your balance is ${usd(result.balanceAfter)}.`);
      await refresh();
    },
  });

  // Once a card is saved its form folds away: replacing a card is rare, topping up is not.
  const cardForm = h('div', { id: 'card-form', hidden: saved ? true : undefined }, h('h3', null, saved ? 'Replace the card' : 'Add a card'), form);
  const replaceToggle = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small', 'aria-expanded': 'false', 'aria-controls': 'card-form' }, 'Change card'));
  replaceToggle.addEventListener('click', () => {
    const opening = cardForm.hidden;
    cardForm.hidden = !opening;
    replaceToggle.setAttribute('aria-expanded', String(opening));
    if (opening) number.input.focus();
  });

  return [
    saved
      ? h('div', { class: 'actions', 'data-card': saved.last4 },
          h('span', null, h('strong', null, `${brandName(saved.brand)} •••• ${saved.last4}`), ` · expires ${String(saved.expMonth).padStart(2, '0')}/${saved.expYear}`),
          replaceToggle,
          remove)
      : h('p', null, 'No card saved yet.'),
    h('div', { class: 'split mt-3' },
      saved ? h('div', null, h('h3', null, 'Top up'), topUp.form) : cardForm,
      saved ? cardForm : h('div', null, h('h3', null, 'Top up'), h('p', null, 'Add a card to top up.'))),
  ];
}

/** @param {string} brand */
function brandName(brand) {
  return brand === 'mastercard' ? 'Mastercard' : brand === 'visa' ? 'Visa' : 'Card';
}

/**
 * A statement line: a machine's time on a day (its name linking to its page,
 * its running time) or a credit (its balance after); the amount to the cent,
 * the exact one on hover.
 * @param {StatementLine} line
 */
function statementRow(line) {
  const label = KIND_LABELS[/** @type {keyof typeof KIND_LABELS} */ (line.kind)] ?? line.kind;
  const machine = line.machine;
  const main = machine
    ? [
        h('div', { class: 'table__primary' },
          h('a', { href: `/machines/${encodeURIComponent(machine.id)}`, title: machine.id, 'data-machine-id': machine.id, class: machine.name ? undefined : 'mono' }, machine.name ?? machine.id),
          ' ', machine.size ? h('span', { class: 'badge badge--neutral badge--plain' }, machine.size) : null),
        h('div', { class: 'table__secondary' }, `${label} · ${duration(line.seconds ?? 0)}`),
      ]
    : [
        h('div', { class: 'table__primary' }, label),
        line.transaction ? h('div', { class: 'table__secondary' }, 'Balance after ', money(line.transaction.balanceAfter)) : null,
      ];
  return h('tr', { dataset: { lineId: line.id, kind: line.kind } },
    h('td', { class: 'table__main' }, main),
    cell('Day', h('time', { datetime: line.day }, utcDay.format(new Date(`${line.day}T00:00:00Z`)))),
    cell('Amount', money(line.amount)));
}
