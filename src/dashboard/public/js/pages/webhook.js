// One endpoint: its settings, test, pause and resume, secret rotation,
// deletion, and its recent deliveries with the last response of each.
import { api, ApiError, messageOf, pagedList } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { formatDate, plural, timeElement } from '../format.js';
import { card, pageHeader } from '../layout.js';
import { navigate, setFlash } from '../navigation.js';
import { copyButton, secretField } from '../secret.js';
import { toast } from '../toast.js';
import { field, handleSubmit } from '../forms.js';
import { endpointForm, loadEventTypes } from './webhook-form.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('./webhook-form.js').Endpoint} Endpoint */
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

/** @param {PageContext} context */
export function webhookPage({ params, onCleanup }) {
  const id = params.id ?? '';
  const path = `/api/event-webhooks/${encodeURIComponent(id)}`;
  const container = h('div', null, loading('Loading endpoint…'));
  /** @type {Endpoint} */
  let endpoint;

  const testResult = h('div', { 'aria-live': 'polite' });
  const deliveries = deliveriesSection(id, onCleanup);

  async function load() {
    try {
      endpoint = await api('GET', path);
    } catch (error) {
      const missing = error instanceof ApiError && error.status === 404;
      replace(container,
        pageHeader({ title: missing ? 'Endpoint not found' : 'Endpoint', breadcrumb: { href: '/event-webhooks', label: 'Event webhooks' } }),
        alertBox('error', missing ? 'There is no endpoint with this ID in your account. It may have been deleted.' : messageOf(error)));
      return;
    }
    draw();
    deliveries.refresh();
  }

  function draw() {
    const test = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Send test event'));
    test.addEventListener('click', () => sendTest(test));
    const toggle = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, endpoint.enabled ? 'Pause' : 'Resume'));
    toggle.addEventListener('click', () => setEnabled(toggle, !endpoint.enabled));
    const edit = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Edit'));
    edit.addEventListener('click', openEditDialog);
    const rotate = h('button', { type: 'button', class: 'btn' }, 'Rotate secret');
    rotate.addEventListener('click', rotateSecret);
    const remove = h('button', { type: 'button', class: 'btn btn--danger' }, 'Delete endpoint');
    remove.addEventListener('click', deleteEndpoint);

    replace(container,
      pageHeader({
        title: endpoint.description || hostOf(endpoint.url),
        oneLine: true,
        breadcrumb: { href: '/event-webhooks', label: 'Event webhooks' },
        description: h('span', { class: 'break mono' }, endpoint.url),
        actions: [test, toggle, edit],
      }),
      h('div', { class: 'stack' },
        testResult,
        endpoint.disabledReason === 'failing'
          ? alertBox('error', h('span', null,
            h('strong', null, 'Disabled because it kept failing.'),
            ` Every delivery failed for days, so this endpoint was disabled${endpoint.disabledAt ? ` on ${formatDate(endpoint.disabledAt)}` : ''}. Fix the receiver, re-enable it, then recover or replay what it missed.`,
            ' ', reEnableButton()), { id: 'disabled-reason' })
          : endpoint.enabled ? null : alertBox('info', 'This endpoint is paused: it receives no new events until you resume it. The test event is still sent.'),
        card({ title: 'Settings', id: 'settings' },
          h('dl', { class: 'kv' },
            h('dt', null, 'Status'), h('dd', null, endpoint.enabled ? badge('Active', 'success') : endpoint.disabledReason === 'failing' ? badge('Disabled: failing', 'danger') : badge('Paused', 'neutral')),
            h('dt', null, 'URL'), h('dd', null, h('code', null, endpoint.url), copyButton(() => endpoint.url, 'endpoint URL', { small: true })),
            h('dt', null, 'Events'), h('dd', null, endpoint.events.includes('*')
              ? 'All events'
              : h('span', { class: 'chips' }, endpoint.events.map((type) => h('span', { class: 'chip' }, type)))),
            h('dt', null, 'Description'), h('dd', null, endpoint.description || h('span', { class: 'muted' }, 'None')),
            h('dt', null, 'Endpoint ID'), h('dd', null, h('code', null, endpoint.id)),
            h('dt', null, 'Created'), h('dd', null, formatDate(endpoint.createdAt)),
            h('dt', null, 'Last changed'), h('dd', null, formatDate(endpoint.updatedAt)))),
        recoveryCard(),
        deliveries.element,
        h('div', { class: 'split' },
          card({ title: 'Signing secret', id: 'secret', description: 'Shown once, when the endpoint was added or the secret rotated. Rotating replaces it at once.', actions: [rotate] }),
          card({ title: 'Delete endpoint', id: 'delete', danger: true, description: 'Stops all deliveries to this URL and cancels the pending ones.', actions: [remove] }))));
  }

  function reEnableButton() {
    const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Re-enable'));
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        endpoint = await patchEndpoint({ enabled: true });
        toast('Endpoint re-enabled: its waiting deliveries go out now.');
        draw();
        deliveries.refresh();
        focusButton('Pause');
      } catch (error) {
        button.disabled = false;
        toast(messageOf(error), 'error');
      }
    });
    return button;
  }

  function recoveryCard() {
    const recover = h('button', { type: 'button', class: 'btn' }, 'Recover failed since…');
    recover.addEventListener('click', () => openWindowDialog('recover'));
    const replay = h('button', { type: 'button', class: 'btn' }, 'Replay missing since…');
    replay.addEventListener('click', () => openWindowDialog('replay'));
    return card({
      title: 'Recover and replay',
      id: 'recovery',
      description: 'After an outage: send again every failed delivery since a time, or deliver the events this endpoint never got (while paused, disabled, or before it existed).',
      actions: [recover, replay],
    });
  }

  /** @param {'recover' | 'replay'} operation */
  function openWindowDialog(operation) {
    const title = operation === 'recover' ? 'Recover failed deliveries' : 'Replay missing events';
    const day = 24 * 60 * 60 * 1000;
    const local = (/** @type {number} */ ms) => new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    const since = field({ label: 'Since', name: 'since', type: 'datetime-local', required: true, value: local(Date.now() - day), hint: 'Your local time. Within the retention period (30 days by default).' });
    const error = h('div');
    const submit = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'btn btn--primary' }, operation === 'recover' ? 'Recover' : 'Replay'));
    const form = /** @type {HTMLFormElement} */ (h('form', { class: 'form', novalidate: true },
      h('p', null, operation === 'recover'
        ? 'Every delivery to this endpoint that failed since this time starts a new series of attempts.'
        : 'Every event since this time that this endpoint subscribes to and never received is delivered to it, once.'),
      since.wrapper, error,
      h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'), submit)));
    handleSubmit(form, submit, error, async () => {
      const at = new Date(since.input.value);
      /** @type {{ count: number }} */
      const result = await api('POST', `${path}/${operation}`, { since: at.toISOString() });
      dialog.close();
      toast(operation === 'recover'
        ? `${plural(result.count, 'failed delivery', 'failed deliveries')} sent again.`
        : `${plural(result.count, 'missed event')} queued for delivery.`);
      deliveries.refresh();
    });
    const dialog = openDialog({ title, content: [form] });
  }

  /** @param {HTMLButtonElement} button */
  async function sendTest(button) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    replace(testResult);
    try {
      /** @type {{ ok: boolean, status: number | null, error: string | null }} */
      const result = await api('POST', `${path}/test`);
      replace(testResult, result.ok
        ? alertBox('success', h('span', null, h('strong', null, 'Test event delivered.'), `Your endpoint answered HTTP ${result.status}.`), { id: 'test-result' })
        : alertBox('error', h('span', null, h('strong', null, 'Test event failed.'), describeFailure(result.status, result.error)), { id: 'test-result' }));
      deliveries.refresh();
    } catch (error) {
      replace(testResult, alertBox('error', messageOf(error), { id: 'test-result' }));
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  /**
   * PATCH answers the changed endpoint; should it answer without one, read it again.
   * @param {Record<string, unknown>} changes
   * @returns {Promise<Endpoint>}
   */
  async function patchEndpoint(changes) {
    const answer = await api('PATCH', path, changes);
    return answer && typeof answer.id === 'string' ? answer : api('GET', path);
  }

  /** @param {HTMLButtonElement} button @param {boolean} enabled */
  async function setEnabled(button, enabled) {
    button.disabled = true;
    try {
      endpoint = await patchEndpoint({ enabled });
      toast(enabled ? 'Endpoint resumed: new events are delivered again.' : 'Endpoint paused: it receives no new events until you resume it.');
      draw();
      focusButton(enabled ? 'Pause' : 'Resume');
    } catch (error) {
      button.disabled = false;
      toast(messageOf(error), 'error');
    }
  }

  async function openEditDialog() {
    let types;
    try {
      types = await loadEventTypes();
    } catch (error) {
      toast(messageOf(error), 'error');
      return;
    }
    const before = endpoint;
    const dialog = openDialog({
      title: 'Edit endpoint',
      wide: true,
      content: [endpointForm({
        types,
        endpoint: before,
        submitLabel: 'Save changes',
        onCancel: () => dialog.close(),
        onSubmit: async (input) => {
          /** @type {Record<string, unknown>} */
          const changes = {};
          if (input.url !== before.url) changes.url = input.url;
          if (input.description !== before.description) changes.description = input.description;
          if (input.events.join('\n') !== before.events.join('\n')) changes.events = input.events;
          if (Object.keys(changes).length > 0) endpoint = await patchEndpoint(changes);
          dialog.close();
          toast(Object.keys(changes).length > 0 ? 'Endpoint saved.' : 'Nothing changed.');
          draw();
          focusButton('Edit');
        },
      })],
    });
  }

  async function rotateSecret() {
    /** @type {string | null} */
    let secret = null;
    const rotated = await confirmAction({
      title: 'Rotate signing secret?',
      message: 'The current secret stops working at once: every delivery from now on is signed with the new one. Update your receiver right away.',
      confirmLabel: 'Rotate secret',
      danger: true,
      action: async () => {
        secret = (await api('POST', `${path}/rotate-secret`)).secret;
      },
    });
    if (!rotated || secret === null) return;
    const dialog = openDialog({
      title: 'New signing secret',
      content: [
        secretField({ label: 'Signing secret', value: secret, note: 'The previous secret no longer verifies deliveries.' }),
        h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')),
      ],
    });
    secret = null;
  }

  async function deleteEndpoint() {
    const deleted = await confirmAction({
      title: 'Delete endpoint?',
      message: h('p', null, 'Deliveries to ', h('strong', { class: 'break' }, endpoint.url), ' stop and pending ones are cancelled. This cannot be undone.'),
      confirmLabel: 'Delete endpoint',
      danger: true,
      action: () => api('DELETE', path),
    });
    if (!deleted) return;
    setFlash({ kind: 'success', text: `Endpoint ${endpoint.url} deleted.` });
    await navigate('/event-webhooks');
  }

  /** After a redraw, focus goes back to the button of the same action. @param {string} label */
  function focusButton(label) {
    const button = [...container.querySelectorAll('.page-header__actions button')].find((node) => node.textContent === label);
    if (button instanceof HTMLElement) button.focus();
  }

  load();
  return container;
}

/**
 * @param {string} endpointId
 * @param {(cleanup: () => void) => void} onCleanup
 */
function deliveriesSection(endpointId, onCleanup) {
  const body = h('div', null, loading('Loading deliveries…'));
  const footer = h('div');
  const refreshButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Refresh'));
  refreshButton.addEventListener('click', () => refresh());
  const statusFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select', 'aria-label': 'Filter by status' },
    h('option', { value: '' }, 'Any status'), h('option', { value: 'pending' }, 'Pending'), h('option', { value: 'delivered' }, 'Delivered'), h('option', { value: 'failed' }, 'Failed')));
  const typeFilter = /** @type {HTMLSelectElement} */ (h('select', { class: 'select', 'aria-label': 'Filter by event type' }, h('option', { value: '' }, 'Any event type')));
  loadEventTypes().then((types) => {
    for (const type of [...types.map((t) => t.type), 'webhook.test']) typeFilter.append(h('option', { value: type }, type));
  }).catch(() => {});
  statusFilter.addEventListener('change', () => refresh());
  typeFilter.addEventListener('change', () => refresh());
  const element = card({
    title: 'Recent deliveries',
    id: 'deliveries',
    flush: true,
    description: 'Each event sent to this endpoint, with its last response. Failed deliveries can be sent again; Details shows every attempt.',
    actions: [statusFilter, typeFilter, refreshButton],
  }, body, footer);

  /** @type {ReturnType<typeof pagedList<Delivery>>} */
  const deliveries = pagedList((cursor) => {
    const query = new URLSearchParams({ endpoint: endpointId, limit: String(DELIVERIES_PAGE) });
    if (statusFilter.value) query.set('status', statusFilter.value);
    if (typeFilter.value) query.set('eventType', typeFilter.value);
    if (cursor) query.set('cursor', cursor);
    return api('GET', `/api/event-webhooks/deliveries?${query}`);
  });
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let left = false;
  onCleanup(() => {
    left = true;
    clearTimeout(timer);
  });

  async function refresh() {
    clearTimeout(timer);
    refreshButton.setAttribute('aria-busy', 'true');
    try {
      await deliveries.first();
      draw();
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
    } finally {
      refreshButton.removeAttribute('aria-busy');
    }
    // While something is still on its way, keep the list current.
    if (!left && deliveries.shown.some((delivery) => delivery.status === 'pending')) timer = setTimeout(refresh, POLL_MS);
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
    replace(body, deliveries.shown.length === 0
      ? (statusFilter.value || typeFilter.value
        ? h('div', { class: 'empty' }, h('h3', null, 'No matching deliveries'), h('p', null, 'No delivery matches these filters.'))
        : h('div', { class: 'empty' }, h('h3', null, 'No deliveries yet'), h('p', null, 'Send a test event to check that your endpoint answers.')))
      : table('Recent deliveries', ['Event', 'Status', 'Attempts', 'Last response', ''], deliveries.shown.map(row)));
    replace(footer, deliveries.nextCursor
      ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older deliveries'))
      : null);
  }

  /** @param {Delivery} delivery */
  function row(delivery) {
    const details = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Details of delivery ${delivery.id}` }, 'Details');
    details.addEventListener('click', () => showDelivery(delivery));
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
    return h('tr', { dataset: { deliveryId: delivery.id, status: delivery.status } },
      h('td', { class: 'table__main' },
        h('div', { class: 'table__primary mono' }, delivery.eventType),
        h('div', { class: 'table__secondary' }, timeElement(delivery.createdAt))),
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

/** @param {number | null} status @param {string | null} error */
function describeFailure(status, error) {
  if (status !== null && error && !error.includes(String(status))) return `Your endpoint answered HTTP ${status}: ${error}`;
  if (status !== null) return `Your endpoint answered HTTP ${status}; only a 2xx status counts as delivered.`;
  return error ?? 'Your endpoint did not answer.';
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
      cell('Time', formatDate(entry.at)),
      cell('Response', entry.status === null ? h('span', null, 'No response', entry.error ? h('span', { class: 'table__secondary' }, ` — ${entry.error}`) : null) : `HTTP ${entry.status}`),
      cell('Duration', `${entry.durationMs} ms`),
      cell('Answer', entry.body ? h('code', { class: 'break' }, entry.body.length > 120 ? `${entry.body.slice(0, 120)}…` : entry.body) : h('span', { class: 'muted' }, '—')))));
}

/** @param {Delivery} delivery */
function showDelivery(delivery) {
  const last = delivery.lastResponse;
  const log = h('div', null, loading('Loading attempts…'));
  api('GET', `/api/event-webhooks/deliveries/${encodeURIComponent(delivery.id)}`)
    .then((/** @type {{ attemptLog: AttemptLogEntry[] }} */ full) => replace(log, attemptLogTable(full.attemptLog)))
    .catch((/** @type {unknown} */ error) => replace(log, alertBox('error', messageOf(error))));
  const rows = [
    ['Delivery ID', h('code', null, delivery.id)],
    ['Event', h('span', null, h('code', null, delivery.eventType), ' ', h('code', null, delivery.eventId))],
    ['Status', deliveryBadge(delivery)],
    ['Attempts', plural(delivery.attempts, 'attempt')],
    ['Created', formatDate(delivery.createdAt)],
    delivery.nextAttemptAt ? ['Next attempt', formatDate(delivery.nextAttemptAt)] : null,
    last ? ['Last attempt', formatDate(last.at)] : null,
    last ? ['Response status', last.status === null ? 'No response' : `HTTP ${last.status}`] : null,
    last && last.durationMs !== null ? ['Duration', `${last.durationMs} ms`] : null,
    last?.error && !(last.status !== null && last.error.includes(String(last.status))) ? ['Error', last.error] : null,
  ].filter((entry) => entry !== null);
  const dialog = openDialog({
    title: 'Delivery',
    wide: true,
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

/** @param {string} url */
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
