// Machines: the list with live status, creating one (its MCP token shown
// once), stop, start, destroy, and a live-view link to share its screen.
import { api, listAll, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { formatDate, timeElement } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card, pageHeader } from '../layout.js';
import { copyButton, secretField } from '../secret.js';
import { toast } from '../toast.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/**
 * @typedef {object} Machine
 * @property {string} id
 * @property {string} name
 * @property {'starting' | 'running' | 'stopping' | 'stopped' | 'error' | 'destroyed'} status
 * @property {string} size
 * @property {string | null} [externalId]
 * @property {Record<string, string>} [labels]
 * @property {string | null} [expiresAt]
 * @property {string} createdAt
 */

const POLL_MS = 2000;
const IN_TRANSITION = new Set(['starting', 'stopping']);

/** @type {Record<string, { label: string, tone: 'success' | 'warning' | 'danger' | 'info' | 'neutral' }>} */
const STATUS = {
  starting: { label: 'Starting', tone: 'warning' },
  running: { label: 'Running', tone: 'success' },
  stopping: { label: 'Stopping', tone: 'warning' },
  stopped: { label: 'Stopped', tone: 'neutral' },
  error: { label: 'Error', tone: 'danger' },
  destroyed: { label: 'Destroyed', tone: 'neutral' },
};

/** @param {PageContext} context */
export function machinesPage({ onCleanup }) {
  const body = h('div', null, loading('Loading machines…'));
  const create = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Create machine'));
  create.addEventListener('click', () => openCreateDialog(refresh));

  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let left = false;
  onCleanup(() => {
    left = true;
    clearTimeout(timer);
  });

  async function refresh() {
    clearTimeout(timer);
    /** @type {Machine[]} */
    let machines;
    try {
      machines = await listAll('/api/machines');
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
      return;
    }
    if (left) return;
    // Keep the focused action where it was when the table is redrawn by polling.
    const focusedAction = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
    replace(body, machines.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'No machines yet'), h('p', null, 'Create a machine for an agent to work in. It boots in a few seconds.'))
      : table('Machines', ['Machine', 'Status', 'Size', 'Created', 'Expires', ''], machines.map((machine) => row(machine, refresh))));
    if (focusedAction) {
      const again = [...body.querySelectorAll('button')].find((node) => node.getAttribute('aria-label') === focusedAction);
      if (again instanceof HTMLElement) again.focus();
    }
    if (machines.some((machine) => IN_TRANSITION.has(machine.status))) timer = setTimeout(refresh, POLL_MS);
  }

  refresh();
  return [
    pageHeader({ title: 'Machines', description: 'Virtual machines your agents drive through MCP. Machine time is metered while they run.', actions: [create] }),
    card({ title: 'Your machines', id: 'machines', flush: true }, body),
  ];
}

/**
 * @param {Machine} machine
 * @param {() => Promise<void>} refresh
 */
function row(machine, refresh) {
  const status = STATUS[machine.status] ?? { label: machine.status, tone: 'neutral' };
  const actions = [];
  /** @param {string} label @param {string} verb @param {string} [extra] @param {() => void | Promise<void>} [run] */
  const action = (label, verb, extra = '', run = undefined) => {
    const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: `btn btn--small ${extra}`, 'aria-label': `${verb} ${machine.name}` }, label));
    button.addEventListener('click', async () => {
      if (run) return run();
      button.disabled = true;
      try {
        await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/${verb.toLowerCase()}`);
        toast(`${machine.name}: ${verb === 'Start' ? 'starting' : 'stopping'}.`);
        await refresh();
      } catch (error) {
        button.disabled = false;
        toast(messageOf(error), 'error');
      }
    });
    return button;
  };
  if (machine.status === 'running') actions.push(action('Live view', 'Live view of', '', () => openLiveView(machine)), action('Stop', 'Stop'));
  if (machine.status === 'stopped' || machine.status === 'error') actions.push(action('Start', 'Start'));
  if (machine.status !== 'destroyed') actions.push(action('Destroy', 'Destroy', 'btn--danger-outline', () => destroy(machine, refresh)));

  const labels = Object.entries(machine.labels ?? {});
  return h('tr', { dataset: { machineId: machine.id, status: machine.status }, class: machine.status === 'destroyed' ? 'is-muted' : undefined },
    h('td', { class: 'table__main' },
      h('div', { class: 'table__primary' }, machine.name),
      h('div', { class: 'table__secondary mono' }, machine.id, machine.externalId ? ` · ${machine.externalId}` : ''),
      labels.length > 0 ? h('div', { class: 'chips mt-3' }, labels.map(([key, value]) => h('span', { class: 'chip' }, `${key}=${value}`))) : null),
    cell('Status', badge(status.label, status.tone, { pulse: IN_TRANSITION.has(machine.status) })),
    cell('Size', machine.size ?? '—'),
    cell('Created', timeElement(machine.createdAt)),
    cell('Expires', timeElement(machine.expiresAt, 'Never')),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, actions)));
}

/**
 * @param {Machine} machine
 * @param {() => Promise<void>} refresh
 */
async function destroy(machine, refresh) {
  const destroyed = await confirmAction({
    title: `Destroy ${machine.name}?`,
    message: 'The machine and its disk are deleted. Anything stored on it is lost, and its MCP token stops working. This cannot be undone.',
    confirmLabel: 'Destroy machine',
    danger: true,
    action: () => api('DELETE', `/api/machines/${encodeURIComponent(machine.id)}`),
  });
  if (!destroyed) return;
  toast(`${machine.name} destroyed.`);
  await refresh();
  const next = document.querySelector('.page-header__actions button');
  if (next instanceof HTMLElement) next.focus();
}

/** @param {Machine} machine */
async function openLiveView(machine) {
  const dialog = openDialog({ title: `Live view of ${machine.name}`, content: [loading('Creating a live-view link…')] });
  try {
    /** @type {{ url: string, expiresAt: string }} */
    const link = await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/live-view`);
    const parsed = new URL(link.url, location.origin);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('The live-view link is not a web address.');
    const url = parsed.toString();
    dialog.setContent(
      h('p', null, 'Anyone with this link can watch the machine’s screen until ', h('strong', null, formatDate(link.expiresAt)), '.'),
      h('div', { class: 'secret__row' },
        h('input', { class: 'input input--mono', type: 'text', readonly: true, value: url, 'aria-label': 'Live-view link', 'data-secret': '' }),
        copyButton(() => url, 'live-view link')),
      h('div', { class: 'dialog__footer' },
        h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Close'),
        h('a', { class: 'btn btn--primary', href: url, target: '_blank', rel: 'noopener noreferrer', 'data-autofocus': '' }, 'Open live view')));
  } catch (error) {
    dialog.setContent(alertBox('error', messageOf(error)));
  }
}

/** "key=value" per line into a labels object. @param {string} text @returns {Record<string, string> | string} the labels, or what is wrong */
export function parseLabels(text) {
  /** @type {Record<string, string>} */
  const labels = {};
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const at = line.indexOf('=');
    if (at <= 0) return `Line ${index + 1}: write each label as key=value.`;
    labels[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return labels;
}

/** @param {() => Promise<void>} refresh */
function openCreateDialog(refresh) {
  const name = field({ label: 'Name', name: 'name', required: true, maxlength: 100, placeholder: 'e.g. research-agent-1' });
  name.input.setAttribute('data-autofocus', '');
  const size = field({ label: 'Size', name: 'size', optional: true, maxlength: 50, hint: 'Leave empty for the default size.' });
  const externalId = field({ label: 'External ID', name: 'externalId', optional: true, maxlength: 200, hint: 'Your own reference, repeated in events.' });
  const labels = field({ label: 'Labels', name: 'labels', optional: true, multiline: true, mono: true, placeholder: 'team=research\nenv=staging', hint: 'One key=value per line.' });
  const expiresAt = field({ label: 'Expires at', name: 'expiresAt', type: 'datetime-local', optional: true, hint: 'In your local time.' });
  const onExpireId = 'machine-on-expire';
  const onExpire = /** @type {HTMLSelectElement} */ (h('select', { id: onExpireId, name: 'onExpire', class: 'select' },
    h('option', { value: 'stop' }, 'Stop it (keeps its disk)'),
    h('option', { value: 'destroy' }, 'Destroy it')));
  labels.input.addEventListener('input', () => {
    const parsed = parseLabels(labels.input.value);
    labels.input.setCustomValidity(typeof parsed === 'string' ? parsed : '');
  });

  const { form } = simpleForm({
    label: 'Create machine',
    fields: [
      name.wrapper,
      h('div', { class: 'form-row' }, size.wrapper, externalId.wrapper),
      labels.wrapper,
      h('div', { class: 'form-row' }, expiresAt.wrapper, h('div', { class: 'field' }, h('label', { for: onExpireId }, 'When it expires'), onExpire)),
    ],
    submitLabel: 'Create machine',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      const parsedLabels = parseLabels(labels.input.value);
      /** @type {Record<string, unknown>} */
      const input = { name: name.input.value.trim() };
      if (size.input.value.trim()) input.size = size.input.value.trim();
      if (externalId.input.value.trim()) input.externalId = externalId.input.value.trim();
      if (typeof parsedLabels === 'object' && Object.keys(parsedLabels).length > 0) input.labels = parsedLabels;
      if (expiresAt.input.value) {
        input.expiresAt = new Date(expiresAt.input.value).toISOString();
        input.onExpire = onExpire.value;
      }
      const machine = await api('POST', '/api/machines', input);
      const mcpUrl = `${location.origin}/api/machines/${encodeURIComponent(machine.id)}/mcp`;
      dialog.setContent(
        alertBox('success', `${machine.name} is ${machine.status === 'running' ? 'running' : 'starting'}.`),
        secretField({ label: 'MCP token', value: machine.mcpToken, note: 'Agents use it for this machine’s MCP endpoint and live view only. Issue a new one if it is lost.' }),
        h('div', { class: 'field' },
          h('span', { class: 'field__label' }, 'MCP endpoint'),
          h('div', { class: 'secret__row' }, h('code', { class: 'input input--mono break' }, mcpUrl), copyButton(() => mcpUrl, 'MCP endpoint'))),
        h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')));
      refresh();
    },
  });
  const dialog = openDialog({ title: 'Create machine', wide: true, content: [form] });
}
