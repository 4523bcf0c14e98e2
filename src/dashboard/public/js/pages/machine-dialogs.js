// The machine dialogs: create (its MCP token shown once), a new MCP token
// (shown once), the live-view link, and the confirmation before destroying.
import { api, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { loadBilling, nextPaymentStep } from '../billing-status.js';
import { alertBox, h, loading, replace } from '../dom.js';
import { formatDate } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { pricePerHour } from '../money.js';
import { copyButton, secretField } from '../secret.js';
import { autoStopField } from './machine-settings.js';
import { networkFields } from './machine-network.js';
import { templateChoice } from './machine-templates.js';

/** @typedef {import('./machines.js').Machine} Machine */

/** The sizes billing prices and the provider boots; the first is the API's default. */
const SIZES = ['small', 'medium', 'large'];

/** The address agents send MCP requests to, with a copy button. @param {string} machineId */
function mcpEndpointField(machineId) {
  const mcpUrl = `${location.origin}/api/machines/${encodeURIComponent(machineId)}/mcp`;
  return h('div', { class: 'field' },
    h('span', { class: 'field__label' }, 'MCP endpoint'),
    h('div', { class: 'secret__row' }, h('code', { class: 'input input--mono break' }, mcpUrl), copyButton(() => mcpUrl, 'MCP endpoint')));
}

/**
 * Asks, then issues a new MCP token (the old one stops working at once) and shows it once.
 * @param {Machine} machine
 */
export async function issueNewToken(machine) {
  /** @type {string | null} */
  let token = null;
  const issued = await confirmAction({
    title: `New MCP token for ${machine.name}?`,
    message: h('p', null,
      h('strong', null, 'The current token stops working at once. '),
      'Agents that use it lose this machine’s MCP endpoint and live view until you give them the new one.'),
    confirmLabel: 'Issue new token',
    danger: true,
    action: async () => {
      token = (await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/mcp-token`)).mcpToken;
    },
  });
  if (!issued || token === null) return;
  const dialog = openDialog({
    title: `New MCP token for ${machine.name}`,
    wide: true,
    content: [
      secretField({ label: 'MCP token', value: token, note: 'The previous token no longer works. Give this one to the agents that use this machine.' }),
      mcpEndpointField(machine.id),
      h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')),
    ],
  });
  token = null;
}

/**
 * @param {Machine} machine
 * @returns {Promise<boolean>} true once destroyed
 */
export function confirmDestroy(machine) {
  return confirmAction({
    title: `Destroy ${machine.name}?`,
    message: 'The machine and its disk are deleted. Anything stored on it is lost, and its MCP token stops working. This cannot be undone.',
    confirmLabel: 'Destroy machine',
    danger: true,
    action: () => api('DELETE', `/api/machines/${encodeURIComponent(machine.id)}`),
  });
}

/**
 * A new live-view link, shown with a button that opens it.
 * @param {Machine} machine
 * @param {{ url: string, expiresAt: string }} [created]  a link already created (one the browser would not open in a new tab)
 */
export async function openLiveView(machine, created) {
  const dialog = openDialog({ title: `Live view of ${machine.name}`, content: [loading('Creating a live-view link…')] });
  try {
    /** @type {{ url: string, expiresAt: string }} */
    const link = created ?? await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/live-view`);
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

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * "NAME=value" per line into an environment (the value kept as typed, spaces and all).
 * @param {string} text @returns {Record<string, string> | string} the variables, or what is wrong
 */
export function parseEnv(text) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') continue;
    const at = line.indexOf('=');
    const name = at < 0 ? line.trim() : line.slice(0, at).trim();
    if (at <= 0 || !ENV_NAME.test(name)) return `Line ${index + 1}: write each variable as NAME=value, the name of letters, digits and _ (not starting with a digit).`;
    env[name] = line.slice(at + 1);
  }
  if (Object.keys(env).length > 64) return 'At most 64 variables.';
  return env;
}

/** @param {() => Promise<void>} refresh */
export function openCreateDialog(refresh) {
  const name = field({ label: 'Name', name: 'name', required: true, maxlength: 100, placeholder: 'e.g. research-agent-1' });
  name.input.setAttribute('data-autofocus', '');
  const sizeId = 'machine-size';
  const sizeHintId = 'machine-size-hint';
  const size = /** @type {HTMLSelectElement} */ (h('select', { id: sizeId, name: 'size', class: 'select', 'aria-describedby': sizeHintId },
    SIZES.map((name) => h('option', { value: name }, name))));
  const sizeHint = h('div', { class: 'field__hint', id: sizeHintId }, 'Charged per millisecond while it runs.');
  // Where the balance stands: the price per hour of each size, and the step that lets a machine run, before the 402 says it.
  const nextStep = h('div');
  loadBilling().then(({ billing, settings }) => {
    if (!settings.enabled) {
      sizeHint.textContent = 'Billing is off on this service: machines are free.';
      return;
    }
    for (const option of size.options) {
      const price = billing.prices[option.value];
      if (price !== undefined) option.textContent = `${option.value} · ${pricePerHour(price)}`;
    }
    const step = nextPaymentStep(billing, settings);
    if (step !== null) {
      replace(nextStep, alertBox('warning', h('span', null,
        h('strong', null, 'Your balance is empty, so a new machine would be refused.'), `${step.text} `,
        h('a', { href: step.href }, step.label)), { 'data-next-step': '' }));
    }
  }, () => {});
  // The images the operator offers (GET /api/images): a choice only when there is more than the base one.
  const imageId = 'machine-image';
  const image = /** @type {HTMLSelectElement} */ (h('select', { id: imageId, name: 'image', class: 'select' }, h('option', { value: 'default' }, 'default')));
  const imageField = h('div', { class: 'field', hidden: true, 'data-image-field': '' }, h('label', { for: imageId }, 'Image'), image,
    h('div', { class: 'field__hint' }, 'What the machine is made from; the default has a desktop.'));
  let offersImages = false;
  api('GET', '/api/images').then((/** @type {{ data: Array<{ name: string, default: boolean }> }} */ images) => {
    if (images.data.length < 2) return;
    replace(image, ...images.data.map((entry) => h('option', { value: entry.name, selected: entry.default }, entry.name)));
    offersImages = true;
    imageField.hidden = template.value() !== null;
  }, () => {});
  // A template starts from the image it was saved from: the image choice goes while one is chosen.
  const template = templateChoice((chosen) => {
    imageField.hidden = !offersImages || chosen !== null;
  });
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
  const env = field({ label: 'Environment', name: 'env', optional: true, multiline: true, mono: true, placeholder: 'GITHUB_TOKEN=ghp_…\nNODE_ENV=production',
    hint: 'One NAME=value per line, given to every command, process and terminal of the machine. Stored encrypted; only the names are shown again.' });
  env.input.setAttribute('autocomplete', 'off');
  env.input.setAttribute('spellcheck', 'false');
  env.input.addEventListener('input', () => {
    const parsed = parseEnv(env.input.value);
    env.input.setCustomValidity(typeof parsed === 'string' ? parsed : '');
  });

  const autoStop = autoStopField({ optional: true });
  const network = networkFields(null);
  const networkDetails = h('details', { class: 'field', 'data-network-details': '' }, h('summary', null, 'Network policy (optional): internet open unless you change it'), network.wrapper);

  const { form } = simpleForm({
    label: 'Create machine',
    fields: [
      nextStep,
      name.wrapper,
      h('div', { class: 'form-row' }, h('div', { class: 'field' }, h('label', { for: sizeId }, 'Size'), size, sizeHint), imageField),
      template.wrapper,
      externalId.wrapper,
      labels.wrapper,
      env.wrapper,
      autoStop.wrapper,
      networkDetails,
      h('div', { class: 'form-row' }, expiresAt.wrapper, h('div', { class: 'field' }, h('label', { for: onExpireId }, 'When it expires'), onExpire)),
    ],
    submitLabel: 'Create machine',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      const parsedLabels = parseLabels(labels.input.value);
      /** @type {Record<string, unknown>} */
      const input = { name: name.input.value.trim() };
      input.size = size.value;
      const chosenTemplate = template.value();
      if (chosenTemplate !== null) input.template = chosenTemplate;
      else if (image.value !== 'default') input.image = image.value;
      if (externalId.input.value.trim()) input.externalId = externalId.input.value.trim();
      if (typeof parsedLabels === 'object' && Object.keys(parsedLabels).length > 0) input.labels = parsedLabels;
      const parsedEnv = parseEnv(env.input.value);
      if (typeof parsedEnv === 'object' && Object.keys(parsedEnv).length > 0) input.env = parsedEnv;
      if (autoStop.input.value !== '') input.autoStopMinutes = Number(autoStop.input.value);
      const policy = network.read();
      if (!policy.internet || policy.deny.length > 0) input.network = policy;
      if (expiresAt.input.value) {
        input.expiresAt = new Date(expiresAt.input.value).toISOString();
        input.onExpire = onExpire.value;
      }
      const machine = await api('POST', '/api/machines', input);
      dialog.setContent(
        alertBox('success', `${machine.name} is ${machine.status === 'running' ? 'running' : 'starting'}.`),
        secretField({ label: 'MCP token', value: machine.mcpToken, note: 'Agents use it for this machine’s MCP endpoint and live view only. If it is lost, issue a new one with “New MCP token” in the list.' }),
        mcpEndpointField(machine.id),
        h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')));
      refresh();
    },
  });
  const dialog = openDialog({ title: 'Create machine', wide: true, content: [form] });
}
