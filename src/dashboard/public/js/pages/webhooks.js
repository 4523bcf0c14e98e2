// Event webhooks: the account's endpoints, and adding one (its secret shown once).
import { api, listAll, messageOf } from '../api.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { openDialog } from '../dialog.js';
import { timeElement } from '../format.js';
import { card, pageHeader } from '../layout.js';
import { secretField } from '../secret.js';
import { describeEvents, endpointForm, loadEventTypes } from './webhook-form.js';

/** @typedef {import('./webhook-form.js').Endpoint} Endpoint */

/** An account may register at most 10 endpoints. */
export const MAX_ENDPOINTS = 10;

export function webhooksPage() {
  const body = h('div', null, loading('Loading endpoints…'));
  const add = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Add endpoint'));
  const quota = h('span', { class: 'muted small' });
  add.addEventListener('click', () => openCreateDialog(add, refresh));

  async function refresh() {
    try {
      /** @type {Endpoint[]} */
      const endpoints = await listAll('/api/event-webhooks');
      const full = endpoints.length >= MAX_ENDPOINTS;
      add.disabled = full;
      quota.textContent = `${endpoints.length} of ${MAX_ENDPOINTS} endpoints${full ? ': delete one to add another' : ''}`;
      replace(body, endpoints.length === 0
        ? h('div', { class: 'empty' },
          h('h3', null, 'No endpoints yet'),
          h('p', null, 'Add an HTTPS endpoint to receive machine and run events as they happen, instead of polling.'))
        : table('Event webhook endpoints', ['Endpoint', 'Events', 'Status', 'Created'], endpoints.map(row)));
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    }
  }

  refresh();
  return [
    pageHeader({
      title: 'Event webhooks',
      description: 'We POST signed JSON to your HTTPS endpoints when machines and runs change, and retry for about an hour when they fail.',
      // The account's events, as delivered (the top bar has no room for another entry at 768 px).
      actions: [h('a', { class: 'btn', href: '/events' }, 'Event history'), add],
    }),
    card({ title: 'Endpoints', id: 'endpoints', flush: true, actions: [quota] }, body),
  ];
}

/** @param {Endpoint} endpoint */
function row(endpoint) {
  return h('tr', { dataset: { endpointId: endpoint.id } },
    h('td', { class: 'table__main' },
      h('div', { class: 'table__primary' }, h('a', { href: `/event-webhooks/${encodeURIComponent(endpoint.id)}` }, endpoint.url)),
      endpoint.description ? h('div', { class: 'table__secondary' }, endpoint.description) : null),
    cell('Events', describeEvents(endpoint.events)),
    cell('Status', endpoint.enabled ? badge('Active', 'success') : endpoint.disabledReason === 'failing' ? badge('Disabled: failing', 'danger') : badge('Paused', 'neutral')),
    cell('Created', timeElement(endpoint.createdAt)));
}

/**
 * @param {HTMLButtonElement} opener
 * @param {() => Promise<void>} refresh
 */
async function openCreateDialog(opener, refresh) {
  opener.setAttribute('aria-busy', 'true');
  let types;
  try {
    types = await loadEventTypes();
  } catch (error) {
    openDialog({ title: 'Add endpoint', content: [alertBox('error', messageOf(error))] });
    return;
  } finally {
    opener.removeAttribute('aria-busy');
  }
  const dialog = openDialog({
    title: 'Add endpoint',
    wide: true,
    content: [endpointForm({
      types,
      submitLabel: 'Add endpoint',
      onCancel: () => dialog.close(),
      onSubmit: async (input) => {
        /** @type {Endpoint & { secret: string }} */
        const created = await api('POST', '/api/event-webhooks', {
          url: input.url,
          events: input.events,
          ...(input.description ? { description: input.description } : {}),
        });
        dialog.setContent(
          alertBox('success', h('span', null, 'Endpoint added: ', h('span', { class: 'break' }, created.url))),
          secretField({ label: 'Signing secret', value: created.secret, note: 'Your receiver uses it to check the Service-Signature header of every delivery.' }),
          h('div', { class: 'dialog__footer' },
            h('a', { class: 'btn', href: `/event-webhooks/${encodeURIComponent(created.id)}` }, 'View endpoint'),
            h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')));
        refresh();
      },
    })],
  });
}
