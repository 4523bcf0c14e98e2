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
        deliveries.element,
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
