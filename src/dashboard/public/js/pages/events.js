// Events: the account's recent events (kept for the retention period), each
// naming the machine or run it is about, with the envelope as delivered and
// its deliveries to the endpoints; filtered by type and by machine, both kept
// in the address (`/events?machine=mch_…`, what a machine's page links to).
import { api, itemsOf, listAll, messageOf, pagedList } from '../api.js';
import { openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { timeElement } from '../format.js';
import { card, pageHeader } from '../layout.js';
import { toast } from '../toast.js';
import { loadEventTypes } from './webhook-form.js';

/**
 * @typedef {object} EventEnvelope
 * @property {string} id
 * @property {string} type
 * @property {string} createdAt
 * @property {Record<string, unknown>} data
 */

const PAGE = 50;
/** The machines offered by the machine filter: the newest 200 (an older one comes from a link, and is added). */
const MACHINE_PAGES = 2;

/** @param {import('../routes.js').PageContext} context */
export function eventsPage({ query }) {
  const body = h('div', null, loading('Loading events…'));
  const footer = h('div');
  const typeFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select', 'aria-label': 'Filter by event type' }, h('option', { value: '' }, 'All event types')));
  const machineFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select', 'aria-label': 'Filter by machine' }, h('option', { value: '' }, 'All machines')));
  const askedType = query.get('type') ?? '';
  const askedMachine = query.get('machine') ?? '';
  // The asked-for choices exist at once (their names follow), so the first read is already filtered.
  if (askedType) typeFilter.append(h('option', { value: askedType }, askedType));
  if (askedMachine) machineFilter.append(h('option', { value: askedMachine }, askedMachine));
  typeFilter.value = askedType;
  machineFilter.value = askedMachine;
  loadEventTypes().then((types) => {
    for (const { type } of types) if (type !== askedType) typeFilter.append(h('option', { value: type }, type));
  }).catch(() => {});
  listAll('/api/machines', MACHINE_PAGES).then((/** @type {Array<{ id: string, name: string }>} */ machines) => {
    for (const machine of machines) {
      const option = [...machineFilter.options].find((existing) => existing.value === machine.id);
      if (option) option.textContent = machine.name;
      else machineFilter.append(h('option', { value: machine.id }, machine.name));
    }
  }).catch(() => {});
  for (const filter of [typeFilter, machineFilter]) {
    filter.addEventListener('change', () => {
      // The address says what is shown: a reload or a shared link asks the same question.
      const address = new URLSearchParams();
      if (typeFilter.value) address.set('type', typeFilter.value);
      if (machineFilter.value) address.set('machine', machineFilter.value);
      history.replaceState(null, '', `${location.pathname}${address.size > 0 ? `?${address}` : ''}`);
      // Another filter asks another question: the pages read for the last one go, and so do
      // their rows and their "Load older" until the new answer is drawn.
      events.forget();
      replace(body, loading('Loading events…'));
      replace(footer, null);
      refresh();
    });
  }

  /** @type {ReturnType<typeof pagedList<EventEnvelope>>} */
  const events = pagedList((cursor) => {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (typeFilter.value) query.set('type', typeFilter.value);
    if (machineFilter.value) query.set('machineId', machineFilter.value);
    if (cursor) query.set('cursor', cursor);
    return api('GET', `/api/events?${query}`);
  });

  async function refresh() {
    try {
      await events.read();
      draw();
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  async function loadMore() {
    try {
      await events.more();
      draw();
    } catch (error) {
      toast(messageOf(error), 'error');
    }
  }

  function draw() {
    replace(body, events.shown.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'No events'), h('p', null, typeFilter.value || machineFilter.value ? 'No matching event in the retention period.' : 'Events appear here as your machines and runs change.'))
      : table('Recent events', ['Event', 'About', 'Created', ''], events.shown.map((event) => eventRow(event))));
    replace(footer, events.nextCursor ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older events')) : null);
  }

  refresh();
  return [
    pageHeader({ title: 'Events', description: 'Every event of your account, as delivered to your endpoints, kept for the retention period (30 days by default).' }),
    card({ title: 'Recent events', id: 'events', flush: true, actions: [h('div', { class: 'actions', role: 'group', 'aria-label': 'Filter events' }, machineFilter, typeFilter)] }, body, footer),
  ];
}

/**
 * One event: its type and id, the machine (or the run and its machine) it is
 * about, linking to the machine's page, and its deliveries.
 * @param {EventEnvelope} event
 * @param {{ about?: boolean }} [options]  about: false leaves out the machine (on that machine's own page)
 */
export function eventRow(event, { about = true } = {}) {
  const open = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Deliveries of event ${event.id}` }, 'Deliveries');
  open.addEventListener('click', () => showEvent(event));
  return h('tr', { dataset: { eventId: event.id } },
    h('td', { class: 'table__main' }, h('div', { class: 'table__primary mono' }, event.type), h('div', { class: 'table__secondary mono' }, event.id)),
    about ? cell('About', subjectLink(event)) : null,
    cell('Created', timeElement(event.createdAt)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, open)));
}

/**
 * The machine an event is about, by name (its id when the event has none), a
 * link to its page; for a run, "run on" it, the run's id on hover.
 * @param {EventEnvelope} event
 */
function subjectLink(event) {
  const machine = /** @type {{ id?: unknown, name?: unknown } | undefined} */ (event.data?.machine);
  if (!machine || typeof machine.id !== 'string') return h('span', { class: 'muted' }, '—');
  const name = typeof machine.name === 'string' ? machine.name : machine.id;
  const link = h('a', { href: `/machines/${encodeURIComponent(machine.id)}`, title: machine.id, 'data-machine-id': machine.id, class: typeof machine.name === 'string' ? undefined : 'mono' }, name);
  const run = /** @type {{ id?: unknown } | undefined} */ (event.data?.run);
  if (run && typeof run.id === 'string') return h('span', { 'data-run-id': run.id }, h('span', { title: run.id }, 'run on '), link);
  return link;
}

/** @param {EventEnvelope} event */
function showEvent(event) {
  const deliveries = h('div', null, loading('Loading deliveries…'));
  api('GET', `/api/event-webhooks/deliveries?${new URLSearchParams({ event: event.id })}`)
    .then((page) => {
      /** @type {Array<{ id: string, endpointId: string, status: string, attempts: number }>} */
      const items = itemsOf(page);
      replace(deliveries, items.length === 0
        ? h('p', { class: 'muted' }, 'No endpoint received this event.')
        : table('Deliveries of this event', ['Endpoint', 'Status', 'Attempts'], items.map((delivery) =>
          h('tr', { dataset: { deliveryId: delivery.id } },
            h('td', { class: 'table__main' }, h('a', { href: `/event-webhooks/${encodeURIComponent(delivery.endpointId)}` }, delivery.endpointId)),
            cell('Status', delivery.status === 'delivered' ? badge('Delivered', 'success') : delivery.status === 'failed' ? badge('Failed', 'danger') : badge('Pending', 'warning')),
            cell('Attempts', String(delivery.attempts))))));
    })
    .catch((/** @type {unknown} */ error) => replace(deliveries, alertBox('error', messageOf(error))));
  const dialog = openDialog({
    title: `Event ${event.type}`,
    wide: true,
    content: [
      h('div', { class: 'field' }, h('span', { class: 'field__label' }, 'Envelope'), h('pre', { class: 'code-block code-block--wrap', tabindex: '0', 'aria-label': 'Envelope' }, JSON.stringify(event, null, 2))),
      h('div', { class: 'field' }, h('span', { class: 'field__label' }, 'Deliveries'), deliveries),
      h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Close')),
    ],
  });
}
