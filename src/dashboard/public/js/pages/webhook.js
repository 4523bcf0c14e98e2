// One endpoint: its recent deliveries first (what each is about, its last
// response, every attempt), then its settings, test, pause and resume,
// recovery, secret rotation and deletion.
import { api, ApiError, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, badge, h, loading, replace } from '../dom.js';
import { formatDate, plural } from '../format.js';
import { card, pageHeader } from '../layout.js';
import { navigate, setFlash } from '../navigation.js';
import { copyButton, secretField } from '../secret.js';
import { toast } from '../toast.js';
import { field, handleSubmit } from '../forms.js';
import { deliveriesSection } from './deliveries.js';
import { endpointForm, loadEventTypes } from './webhook-form.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('./webhook-form.js').Endpoint} Endpoint */


/**
 * @typedef {object} EndpointPage  what the parts of the page share
 * @property {string} path  the endpoint in the API
 * @property {Endpoint} endpoint  as last read or changed; the page is drawn again from it after each change
 * @property {HTMLElement} container
 * @property {HTMLElement} testResult  the answer to the last test event
 * @property {{ element: HTMLElement, refresh: () => Promise<void> }} deliveries
 */

/** @param {PageContext} context */
export function webhookPage({ params, onCleanup }) {
  const id = params.id ?? '';
  const container = h('div', null, loading('Loading endpoint…'));
  const testResult = h('div', { 'aria-live': 'polite' });
  const deliveries = deliveriesSection(id, onCleanup);
  load({ path: `/api/event-webhooks/${encodeURIComponent(id)}`, container, testResult, deliveries });
  return container;
}

/** @param {Omit<EndpointPage, 'endpoint'>} parts */
async function load(parts) {
  /** @type {EndpointPage} */
  let page;
  try {
    page = { ...parts, endpoint: await api('GET', parts.path) };
  } catch (error) {
    const missing = error instanceof ApiError && error.status === 404;
    replace(parts.container,
      pageHeader({ title: missing ? 'Endpoint not found' : 'Endpoint', breadcrumb: { href: '/event-webhooks', label: 'Event webhooks' } }),
      alertBox('error', missing ? 'There is no endpoint with this ID in your account. It may have been deleted.' : messageOf(error)));
    return;
  }
  draw(page);
  page.deliveries.refresh();
}

/** @param {EndpointPage} page */
function draw(page) {
  const { endpoint } = page;
  replace(page.container,
    pageHeader({
      title: endpoint.description || hostOf(endpoint.url),
      oneLine: true,
      breadcrumb: { href: '/event-webhooks', label: 'Event webhooks' },
      description: h('span', { class: 'break mono' }, endpoint.url),
      actions: headerActions(page),
    }),
    h('div', { class: 'stack' },
      page.testResult,
      stateAlert(page),
      page.deliveries.element,
      settingsCard(endpoint),
      recoveryCard(page),
      h('div', { class: 'split' }, secretCard(page), deleteCard(page))));
}

/** Send test event, Pause or Resume, Edit. @param {EndpointPage} page */
function headerActions(page) {
  const test = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Send test event'));
  test.addEventListener('click', () => sendTest(page, test));
  const toggle = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, page.endpoint.enabled ? 'Pause' : 'Resume'));
  toggle.addEventListener('click', () => setEnabled(page, toggle, !page.endpoint.enabled));
  const edit = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Edit'));
  edit.addEventListener('click', () => openEditDialog(page));
  return [test, toggle, edit];
}

/** Why no new events go out, if none do: disabled for failing (with Re-enable), or paused. @param {EndpointPage} page */
function stateAlert(page) {
  const { endpoint } = page;
  if (endpoint.disabledReason === 'failing') {
    return alertBox('error', h('span', null,
      h('strong', null, 'Disabled because it kept failing.'),
      ` Every delivery failed for days, so this endpoint was disabled${endpoint.disabledAt ? ` on ${formatDate(endpoint.disabledAt)}` : ''}. Fix the receiver, re-enable it, then recover or replay what it missed.`,
      ' ', reEnableButton(page)), { id: 'disabled-reason' });
  }
  return endpoint.enabled ? null : alertBox('info', 'This endpoint is paused: it receives no new events until you resume it. The test event is still sent.');
}

/** @param {Endpoint} endpoint */
function settingsCard(endpoint) {
  return card({ title: 'Settings', id: 'settings' },
    h('dl', { class: 'kv' },
      h('dt', null, 'Status'), h('dd', null, endpoint.enabled ? badge('Active', 'success') : endpoint.disabledReason === 'failing' ? badge('Disabled: failing', 'danger') : badge('Paused', 'neutral')),
      h('dt', null, 'URL'), h('dd', null, h('code', null, endpoint.url), copyButton(() => endpoint.url, 'endpoint URL', { small: true })),
      h('dt', null, 'Events'), h('dd', null, endpoint.events.includes('*')
        ? 'All events'
        : h('span', { class: 'chips' }, endpoint.events.map((type) => h('span', { class: 'chip' }, type)))),
      h('dt', null, 'Description'), h('dd', null, endpoint.description || h('span', { class: 'muted' }, 'None')),
      h('dt', null, 'Endpoint ID'), h('dd', null, h('code', null, endpoint.id)),
      h('dt', null, 'Created'), h('dd', null, formatDate(endpoint.createdAt)),
      h('dt', null, 'Last changed'), h('dd', null, formatDate(endpoint.updatedAt))));
}

/** @param {EndpointPage} page */
function recoveryCard(page) {
  const recover = h('button', { type: 'button', class: 'btn' }, 'Recover failed since…');
  recover.addEventListener('click', () => openWindowDialog(page, 'recover'));
  const replay = h('button', { type: 'button', class: 'btn' }, 'Replay missing since…');
  replay.addEventListener('click', () => openWindowDialog(page, 'replay'));
  return card({
    title: 'Recover and replay',
    id: 'recovery',
    description: 'After an outage: send again every failed delivery since a time, or deliver the events this endpoint never got (while paused, disabled, or before it existed).',
    actions: [recover, replay],
  });
}

/** @param {EndpointPage} page */
function secretCard(page) {
  const rotate = h('button', { type: 'button', class: 'btn' }, 'Rotate secret');
  rotate.addEventListener('click', () => rotateSecret(page));
  return card({ title: 'Signing secret', id: 'secret', description: 'Shown once, when the endpoint was added or the secret rotated. Rotating replaces it at once.', actions: [rotate] });
}

/** @param {EndpointPage} page */
function deleteCard(page) {
  const remove = h('button', { type: 'button', class: 'btn btn--danger' }, 'Delete endpoint');
  remove.addEventListener('click', () => deleteEndpoint(page));
  return card({ title: 'Delete endpoint', id: 'delete', danger: true, description: 'Stops all deliveries to this URL and cancels the pending ones.', actions: [remove] });
}

/** @param {EndpointPage} page @param {HTMLButtonElement} button */
async function sendTest(page, button) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  replace(page.testResult);
  try {
    /** @type {{ ok: boolean, status: number | null, error: string | null }} */
    const result = await api('POST', `${page.path}/test`);
    replace(page.testResult, result.ok
      ? alertBox('success', h('span', null, h('strong', null, 'Test event delivered.'), `Your endpoint answered HTTP ${result.status}.`), { id: 'test-result' })
      : alertBox('error', h('span', null, h('strong', null, 'Test event failed.'), describeFailure(result.status, result.error)), { id: 'test-result' }));
    page.deliveries.refresh();
  } catch (error) {
    replace(page.testResult, alertBox('error', messageOf(error), { id: 'test-result' }));
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

/**
 * PATCH answers the changed endpoint; should it answer without one, read it again.
 * @param {EndpointPage} page
 * @param {Record<string, unknown>} changes
 * @returns {Promise<Endpoint>}
 */
async function patchEndpoint(page, changes) {
  const answer = await api('PATCH', page.path, changes);
  return answer && typeof answer.id === 'string' ? answer : api('GET', page.path);
}

/** Pause and Resume. @param {EndpointPage} page @param {HTMLButtonElement} button @param {boolean} enabled */
async function setEnabled(page, button, enabled) {
  button.disabled = true;
  try {
    page.endpoint = await patchEndpoint(page, { enabled });
    toast(enabled ? 'Endpoint resumed: new events are delivered again.' : 'Endpoint paused: it receives no new events until you resume it.');
    draw(page);
    focusButton(page, enabled ? 'Pause' : 'Resume');
  } catch (error) {
    button.disabled = false;
    toast(messageOf(error), 'error');
  }
}

/** An endpoint disabled for failing, enabled again; what waited for it goes out. @param {EndpointPage} page */
function reEnableButton(page) {
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Re-enable'));
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      page.endpoint = await patchEndpoint(page, { enabled: true });
      toast('Endpoint re-enabled: its waiting deliveries go out now.');
      draw(page);
      page.deliveries.refresh();
      focusButton(page, 'Pause');
    } catch (error) {
      button.disabled = false;
      toast(messageOf(error), 'error');
    }
  });
  return button;
}

/** @param {EndpointPage} page */
async function openEditDialog(page) {
  let types;
  try {
    types = await loadEventTypes();
  } catch (error) {
    toast(messageOf(error), 'error');
    return;
  }
  const before = page.endpoint;
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
        if (Object.keys(changes).length > 0) page.endpoint = await patchEndpoint(page, changes);
        dialog.close();
        toast(Object.keys(changes).length > 0 ? 'Endpoint saved.' : 'Nothing changed.');
        draw(page);
        focusButton(page, 'Edit');
      },
    })],
  });
}

/**
 * Recover (send again what failed) or replay (deliver what was never sent) since a time.
 * @param {EndpointPage} page
 * @param {'recover' | 'replay'} operation
 */
function openWindowDialog(page, operation) {
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
    const result = await api('POST', `${page.path}/${operation}`, { since: at.toISOString() });
    dialog.close();
    toast(operation === 'recover'
      ? `${plural(result.count, 'failed delivery', 'failed deliveries')} sent again.`
      : `${plural(result.count, 'missed event')} queued for delivery.`);
    page.deliveries.refresh();
  });
  const dialog = openDialog({ title, content: [form] });
}

/** @param {EndpointPage} page */
async function rotateSecret(page) {
  /** @type {string | null} */
  let secret = null;
  const rotated = await confirmAction({
    title: 'Rotate signing secret?',
    message: 'The current secret stops working at once: every delivery from now on is signed with the new one. Update your receiver right away.',
    confirmLabel: 'Rotate secret',
    danger: true,
    action: async () => {
      secret = (await api('POST', `${page.path}/rotate-secret`)).secret;
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

/** @param {EndpointPage} page */
async function deleteEndpoint(page) {
  const { endpoint } = page;
  const deleted = await confirmAction({
    title: 'Delete endpoint?',
    message: h('p', null, 'Deliveries to ', h('strong', { class: 'break' }, endpoint.url), ' stop and pending ones are cancelled. This cannot be undone.'),
    confirmLabel: 'Delete endpoint',
    danger: true,
    action: () => api('DELETE', page.path),
  });
  if (!deleted) return;
  setFlash({ kind: 'success', text: `Endpoint ${endpoint.url} deleted.` });
  await navigate('/event-webhooks');
}

/** After a redraw, focus goes back to the button of the same action. @param {EndpointPage} page @param {string} label */
function focusButton(page, label) {
  const button = [...page.container.querySelectorAll('.page-header__actions button')].find((node) => node.textContent === label);
  if (button instanceof HTMLElement) button.focus();
}

/** @param {number | null} status @param {string | null} error */
function describeFailure(status, error) {
  if (status !== null && error && !error.includes(String(status))) return `Your endpoint answered HTTP ${status}: ${error}`;
  if (status !== null) return `Your endpoint answered HTTP ${status}; only a 2xx status counts as delivered.`;
  return error ?? 'Your endpoint did not answer.';
}

/** @param {string} url */
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
