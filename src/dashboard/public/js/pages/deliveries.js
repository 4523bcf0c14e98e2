// The deliveries of one endpoint: the list with its filters, what each
// delivery is about (the machine or run of its event), its last response,
// retry, and the dialog with every attempt.
import { api, messageOf, pagedList } from '../api.js';
import { openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { formatDate, formatPrecise, plural, timeElement } from '../format.js';
import { card } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { loadEventTypes } from './webhook-form.js';

/**
 * @typedef {object} Delivery
 * @property {string} id
 * @property {string} endpointId
 * @property {string} eventId
 * @property {string} eventType
 * @property {'pending' | 'delivered' | 'failed'} status
 * @property {number} attempts
 * @property {{ status: number | null, body: string | null, error: string | null, durationMs: number | null, at: string } | null} lastResponse
 * @property {string | null} nextAttemptAt
 * @property {string} createdAt
 */

const DELIVERIES_PAGE = 50;
const POLL_MS = 3000;

/**
 * @param {string} endpointId
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function deliveriesSection(endpointId, onCleanup) {
  const body = h('div', null, loading('Loading deliveries…'));
  const footer = h('div');
  const refreshButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Refresh'));
  refreshButton.addEventListener('click', () => refresh());
  const statusFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select select--inline', 'aria-label': 'Filter by status' },
    h('option', { value: '' }, 'Any status'), h('option', { value: 'pending' }, 'Pending'), h('option', { value: 'delivered' }, 'Delivered'), h('option', { value: 'failed' }, 'Failed')));
  const typeFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select select--inline', 'aria-label': 'Filter by event type' }, h('option', { value: '' }, 'Any event type')));
  loadEventTypes().then((types) => {
    for (const type of [...types.map((t) => t.type), 'webhook.test']) typeFilter.append(h('option', { value: type }, type));
  }).catch(() => {});
  // Other filters ask another question: the pages read for the last one go, and so do
  // their rows and their "Load older" until the new answer is drawn.
  const filtered = () => {
    deliveries.forget();
    replace(body, loading('Loading deliveries…'));
    replace(footer, null);
    refresh();
  };
  statusFilter.addEventListener('change', filtered);
  typeFilter.addEventListener('change', filtered);
  const element = card({
    title: 'Recent deliveries',
    id: 'deliveries',
    flush: true,
    description: 'Each event sent to this endpoint, the machine or run it is about, and its last response. Failed deliveries can be sent again; Details shows every attempt.',
  }, h('div', { class: 'filter-bar', role: 'group', 'aria-label': 'Filter deliveries' }, statusFilter, typeFilter, refreshButton), body, footer);
  /** What each event is about, by event id: read once per event (an event never changes). */
  const subjects = eventSubjects(() => draw());

  /** @type {ReturnType<typeof pagedList<Delivery>>} */
  const deliveries = pagedList((cursor) => {
    const query = new URLSearchParams({ endpoint: endpointId, limit: String(DELIVERIES_PAGE) });
    if (statusFilter.value) query.set('status', statusFilter.value);
    if (typeFilter.value) query.set('eventType', typeFilter.value);
    if (cursor) query.set('cursor', cursor);
    return api('GET', `/api/event-webhooks/deliveries?${query}`);
  });
  const { refresh } = poll(onCleanup, readDeliveries, POLL_MS);

  /** @returns {Promise<boolean>} whether a delivery shown is still on its way */
  async function readDeliveries() {
    refreshButton.setAttribute('aria-busy', 'true');
    try {
      await deliveries.read();
      draw();
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    } finally {
      refreshButton.removeAttribute('aria-busy');
    }
    // While something is still on its way, keep the list current.
    return deliveries.shown.some((delivery) => delivery.status === 'pending');
  }

  async function loadMore() {
    try {
      await deliveries.more();
      draw();
    } catch (error) {
      toast(messageOf(error), 'error');
    }
  }

  function draw() {
    subjects.want(deliveries.shown);
    // Polling and the subjects arriving redraw the rows: the focused button stays focused.
    const focused = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
    replace(body, deliveries.shown.length === 0
      ? (statusFilter.value || typeFilter.value
        ? h('div', { class: 'empty' }, h('h3', null, 'No matching deliveries'), h('p', null, 'No delivery matches these filters.'))
        : h('div', { class: 'empty' }, h('h3', null, 'No deliveries yet'), h('p', null, 'Send a test event to check that your endpoint answers.')))
      : table('Recent deliveries', ['Event', 'Status', 'Attempts', 'Last response', ''], deliveries.shown.map(row)));
    const again = focused ? [...body.querySelectorAll('button')].find((button) => button.getAttribute('aria-label') === focused) : undefined;
    again?.focus();
    replace(footer, deliveries.nextCursor
      ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older deliveries'))
      : null);
  }

  /** @param {Delivery} delivery */
  function row(delivery) {
    const details = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Details of delivery ${delivery.id}` }, 'Details');
    details.addEventListener('click', () => showDelivery(delivery, subjects.of(delivery)));
    /** @type {HTMLButtonElement | null} */
    let retry = null;
    if (delivery.status === 'failed') {
      const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Retry delivery ${delivery.id}` }, 'Retry'));
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          await api('POST', `/api/event-webhooks/deliveries/${encodeURIComponent(delivery.id)}/retry`);
          toast('Delivery queued again.');
          await refresh();
          refreshButton.focus();
        } catch (error) {
          button.disabled = false;
          toast(messageOf(error), 'error');
        }
      });
      retry = button;
    }
    const subject = subjects.of(delivery);
    return h('tr', { dataset: { deliveryId: delivery.id, status: delivery.status } },
      h('td', { class: 'table__main' },
        h('div', { class: 'table__primary mono' }, delivery.eventType),
        h('div', { class: 'table__secondary' },
          subject ? [h('span', { class: 'subject', title: subject.id ?? undefined, 'data-subject': subject.text }, subject.text), ' · '] : null,
          timeElement(delivery.createdAt))),
      cell('Status', deliveryBadge(delivery)),
      cell('Attempts', String(delivery.attempts)),
      cell('Last response', lastResponseSummary(delivery)),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, details, retry)));
  }

  return { element, refresh };
}

/** @param {Delivery} delivery */
function deliveryBadge(delivery) {
  if (delivery.status === 'delivered') return badge('Delivered', 'success');
  if (delivery.status === 'failed') return badge('Failed', 'danger');
  return badge(delivery.attempts > 0 ? 'Retrying' : 'Pending', 'warning', { pulse: true });
}

/** @param {Delivery} delivery */
function lastResponseSummary(delivery) {
  const last = delivery.lastResponse;
  if (!last) return h('span', { class: 'muted' }, 'No attempt yet');
  const parts = [last.status === null ? 'No response' : `HTTP ${last.status}`];
  if (last.durationMs !== null && last.durationMs !== undefined) parts.push(`${last.durationMs} ms`);
  const error = last.error && !(last.status !== null && last.error.includes(String(last.status))) ? last.error : null;
  return h('span', { class: 'break' }, parts.join(' · '), error ? h('span', { class: 'table__secondary' }, ` — ${error}`) : null);
}

/**
 * What a delivery is about, read from its event's envelope: the machine's
 * name (its id on hover), or the run and its machine.
 * @typedef {{ text: string, id: string | null }} Subject
 */

/** Envelopes read at once: a page of deliveries asks for its events a few at a time. */
const CONCURRENT_READS = 4;

/**
 * The subjects of deliveries' events, from GET /api/events/{id}, each read
 * once (an event never changes); `onChange` runs when new ones are known.
 * @param {() => void} onChange
 */
export function eventSubjects(onChange) {
  /** @type {Map<string, Subject | null>} */
  const known = new Map();
  /** @type {string[]} */
  let queue = [];
  let reading = 0;

  function pump() {
    while (reading < CONCURRENT_READS && queue.length > 0) {
      const eventId = /** @type {string} */ (queue.shift());
      reading += 1;
      api('GET', `/api/events/${encodeURIComponent(eventId)}`)
        .then((envelope) => known.set(eventId, subjectOf(envelope)), () => known.set(eventId, null))
        .finally(() => {
          reading -= 1;
          if (queue.length === 0 && reading === 0) onChange();
          pump();
        });
    }
  }

  return {
    /** Asks for the subjects of these deliveries that are not known yet. @param {Delivery[]} deliveries */
    want(deliveries) {
      const fresh = deliveries.filter((delivery) => delivery.eventType !== 'webhook.test' && !known.has(delivery.eventId) && !queue.includes(delivery.eventId));
      if (fresh.length === 0) return;
      for (const delivery of fresh) known.set(delivery.eventId, null);
      queue = [...queue, ...fresh.map((delivery) => delivery.eventId)];
      pump();
    },
    /** @param {Delivery} delivery @returns {Subject | null} */
    of(delivery) {
      if (delivery.eventType === 'webhook.test') return { text: 'Test event', id: null };
      return known.get(delivery.eventId) ?? null;
    },
  };
}

/** @param {any} envelope @returns {Subject | null} */
function subjectOf(envelope) {
  const machine = envelope?.data?.machine;
  const run = envelope?.data?.run;
  const name = typeof machine?.name === 'string' ? machine.name : null;
  if (run && typeof run.id === 'string') return { text: name ? `run on ${name}` : 'run', id: run.id };
  if (name) return { text: name, id: typeof machine.id === 'string' ? machine.id : null };
  return null;
}

/**
 * @typedef {object} AttemptLogEntry
 * @property {number} n
 * @property {string} at
 * @property {number | null} status
 * @property {number} durationMs
 * @property {string | null} error
 * @property {string | null} body
 */

/** @param {AttemptLogEntry[]} log */
function attemptLogTable(log) {
  if (log.length === 0) return h('p', { class: 'muted' }, 'No attempt recorded yet.');
  return table('Attempt log', ['#', 'Time', 'Response', 'Duration', 'Answer'], log.map((entry) =>
    h('tr', { dataset: { attempt: String(entry.n) } },
      cell('#', String(entry.n)),
      cell('Time', h('time', { class: 'nowrap', datetime: entry.at, title: formatDate(entry.at) }, formatPrecise(entry.at))),
      cell('Response', entry.status === null ? h('span', null, 'No response', entry.error ? h('span', { class: 'table__secondary' }, ` — ${entry.error}`) : null) : `HTTP ${entry.status}`),
      cell('Duration', `${entry.durationMs} ms`),
      cell('Answer', entry.body ? h('code', { class: 'break' }, entry.body.length > 120 ? `${entry.body.slice(0, 120)}…` : entry.body) : h('span', { class: 'muted' }, '—')))));
}

/**
 * The delivery and every attempt, in a dialog wide enough for the attempt
 * log's times on one line; it opens on its close button, so its title and
 * that button are in view however long the log (the header stays put while
 * the body scrolls).
 * @param {Delivery} delivery
 * @param {Subject | null} subject
 */
function showDelivery(delivery, subject) {
  const last = delivery.lastResponse;
  const log = h('div', null, loading('Loading attempts…'));
  api('GET', `/api/event-webhooks/deliveries/${encodeURIComponent(delivery.id)}`)
    .then((/** @type {{ attemptLog: AttemptLogEntry[] }} */ full) => replace(log, attemptLogTable(full.attemptLog)))
    .catch((/** @type {unknown} */ error) => replace(log, alertBox('error', messageOf(error))));
  const rows = [
    ['Delivery ID', h('code', null, delivery.id)],
    ['Event', h('span', null, h('code', null, delivery.eventType), ' ', h('code', null, delivery.eventId))],
    subject ? ['About', h('span', { title: subject.id ?? undefined }, subject.text)] : null,
    ['Status', deliveryBadge(delivery)],
    ['Attempts', plural(delivery.attempts, 'attempt')],
    ['Created', formatDate(delivery.createdAt)],
    delivery.nextAttemptAt ? ['Next attempt', formatDate(delivery.nextAttemptAt)] : null,
    last ? ['Last attempt', formatDate(last.at)] : null,
    last ? ['Response status', last.status === null ? 'No response' : `HTTP ${last.status}`] : null,
    last && last.durationMs !== null ? ['Duration', `${last.durationMs} ms`] : null,
    last?.error && !(last.status !== null && last.error.includes(String(last.status))) ? ['Error', last.error] : null,
  ].filter((entry) => entry !== null && entry !== undefined);
  const dialog = openDialog({
    title: 'Delivery',
    size: 'widest',
    initialFocus: 'close',
    content: [
      h('dl', { class: 'kv' }, rows.map((entry) => [h('dt', null, entry[0]), h('dd', null, entry[1])])),
      last?.body
        ? h('div', { class: 'field' }, h('span', { class: 'field__label' }, 'Response body (first 1,024 bytes)'), h('pre', { class: 'code-block code-block--wrap', tabindex: '0', 'aria-label': 'Response body' }, last.body))
        : null,
      h('div', { class: 'field' }, h('span', { class: 'field__label' }, 'Every attempt'), log),
      h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Close')),
    ],
  });
}
