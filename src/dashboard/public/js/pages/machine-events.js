// A machine's own events (GET /api/events?machineId), newest first, on its
// page: read again whenever its status changes, since a change is an event.
import { api, messageOf, pagedList } from '../api.js';
import { alertBox, h, loading, replace, table } from '../dom.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';
import { eventRow } from './events.js';

const PAGE = 10;

/** @param {string} machineId */
export function machineEventsSection(machineId) {
  const body = h('div', null, loading('Loading events…'));
  const footer = h('div');
  const element = card({
    title: 'Events',
    id: 'machine-events',
    flush: true,
    description: 'What happened to this machine and its runs, as sent to your event webhooks.',
    actions: [h('a', { class: 'btn btn--small', href: `/events?${new URLSearchParams({ machine: machineId })}` }, 'All its events')],
  }, body, footer);

  /** @type {ReturnType<typeof pagedList<import('./events.js').EventEnvelope>>} */
  const events = pagedList((cursor) => api('GET', `/api/events?${new URLSearchParams({ machineId, limit: String(PAGE), ...(cursor ? { cursor } : {}) })}`));

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
      ? h('div', { class: 'empty' }, h('h3', null, 'No events yet'), h('p', null, 'Its events appear here as it starts, stops and runs commands.'))
      : table(`Events of this machine`, ['Event', 'Created', ''], events.shown.map((event) => eventRow(event, { about: false }))));
    replace(footer, events.nextCursor ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older events')) : null);
  }

  let lastStatus = '';
  return {
    element,
    /** @param {string} status */
    setStatus(status) {
      if (status === lastStatus) return;
      lastStatus = status;
      refresh();
    },
  };
}
