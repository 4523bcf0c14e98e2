// Events: the account's recent events (kept for the retention period), each
// with the envelope as delivered and its deliveries to the endpoints.
import { api, itemsOf, messageOf, pagedList } from '../api.js';
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

export function eventsPage() {
  const body = h('div', null, loading('Loading events…'));
  const footer = h('div');
  const typeFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select', 'aria-label': 'Filter by event type' }, h('option', { value: '' }, 'All event types')));
  loadEventTypes().then((types) => {
    for (const { type } of types) typeFilter.append(h('option', { value: type }, type));
  }).catch(() => {});
  typeFilter.addEventListener('change', () => {
    // Another type asks another question: the pages read for the last one go.
    events.forget();
    refresh();
  });

  /** @type {ReturnType<typeof pagedList<EventEnvelope>>} */
  const events = pagedList((cursor) => {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (typeFilter.value) query.set('type', typeFilter.value);
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
      ? h('div', { class: 'empty' }, h('h3', null, 'No events'), h('p', null, typeFilter.value ? 'No event of this type in the retention period.' : 'Events appear here as your machines and runs change.'))
      : table('Recent events', ['Event', 'Created', ''], events.shown.map(row)));
    replace(footer, events.nextCursor ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older events')) : null);
  }

  refresh();
  return [
    pageHeader({ title: 'Events', description: 'Every event of your account, as delivered to your endpoints, kept for the retention period (30 days by default).' }),
    card({ title: 'Recent events', id: 'events', flush: true, actions: [typeFilter] }, body, footer),
  ];
}

/** @param {EventEnvelope} event */
function row(event) {
  const open = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Deliveries of event ${event.id}` }, 'Deliveries');
  open.addEventListener('click', () => showEvent(event));
  return h('tr', { dataset: { eventId: event.id } },
    h('td', { class: 'table__main' }, h('div', { class: 'table__primary mono' }, event.type), h('div', { class: 'table__secondary mono' }, event.id)),
    cell('Created', timeElement(event.createdAt)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, open)));
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
