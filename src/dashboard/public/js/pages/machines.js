// Machines: the list with live status, and the row actions (start, stop, pause,
// resume,
// live view, a new MCP token, destroy); each name leads to the machine's page
// (runs, files, processes). Destroyed machines stay in the API's
// list for the record; here they are hidden until asked for. Below, the
// account's templates.
import { api, listAll, messageOf } from '../api.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { timeElement } from '../format.js';
import { card, pageHeader } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { gettingStarted } from './getting-started.js';
import { confirmDestroy, issueNewToken, openCreateDialog, openLiveView } from './machine-dialogs.js';
import { templatesCard } from './machine-templates.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/**
 * @typedef {object} Machine
 * @property {string} id
 * @property {string} name
 * @property {string} status  starting, running, paused, stopping, stopped, error, destroyed, or one added later
 * @property {string} size
 * @property {string | null} [externalId]
 * @property {Record<string, string>} [labels]
 * @property {string | null} [expiresAt]
 * @property {number} [autoStopMinutes]  idle stop; 0: never
 * @property {{ internet: boolean, allow: string[], deny: string[] } | null} [network]
 * @property {string} createdAt
 */

/**
 * @typedef {object} MachineHost  GET /api/dashboard/machines
 * @property {'docker' | 'simulated'} provider
 * @property {'auto' | 'docker' | 'simulated'} configured
 * @property {'ready' | 'building' | 'failed' | null} image
 */

const POLL_MS = 2000;
/** Statuses that stay until someone acts; any other (starting, stopping, one this page does not know) is watched. */
const SETTLED = new Set(['running', 'paused', 'stopped', 'error', 'destroyed']);

/** @type {Record<string, { label: string, tone: 'success' | 'warning' | 'danger' | 'info' | 'neutral' }>} */
const STATUS = {
  starting: { label: 'Starting', tone: 'warning' },
  running: { label: 'Running', tone: 'success' },
  paused: { label: 'Paused', tone: 'info' },
  stopping: { label: 'Stopping', tone: 'warning' },
  stopped: { label: 'Stopped', tone: 'neutral' },
  error: { label: 'Error', tone: 'danger' },
  destroyed: { label: 'Destroyed', tone: 'neutral' },
};

/** @typedef {'start' | 'stop' | 'pause' | 'resume'} MachineVerb */

/** What a toast says once the API took the change (a pause and a resume are done when answered; a start or stop is on its way). */
export const VERB_DONE = { start: 'starting', stop: 'stopping', pause: 'paused', resume: 'resumed' };

/**
 * The badge for any status, including one added to the API after this page
 * was written: "hibernating" reads "Hibernating", in a neutral colour.
 * @param {string} status
 */
export function statusBadge(status) {
  const known = STATUS[status];
  const words = String(status ?? '').replace(/[_-]+/g, ' ').trim();
  const label = known?.label ?? (words === '' ? 'Unknown' : words.charAt(0).toUpperCase() + words.slice(1));
  const moving = status === 'starting' || status === 'stopping';
  return badge(label, known?.tone ?? 'neutral', { pulse: moving });
}

/** @param {PageContext} context */
export function machinesPage({ onCleanup, account, refreshChrome }) {
  const body = h('div', null, loading('Loading machines…'));
  const create = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--primary' }, 'Create machine'));
  create.addEventListener('click', () => openCreateDialog(refresh));
  const guide = gettingStarted({ account, refreshChrome, onCreateMachine: () => openCreateDialog(refresh) });

  let showDestroyed = false;
  const toggleInput = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const toggleText = h('span', null, 'Show destroyed');
  const toggle = h('label', { class: 'toggle', hidden: true }, toggleInput, toggleText);
  toggleInput.addEventListener('change', () => {
    showDestroyed = toggleInput.checked;
    draw();
  });

  /** @type {Machine[]} */
  let machines = [];
  const list = poll(onCleanup, readMachines, POLL_MS);
  const refresh = list.refresh;
  const hostSlot = h('div', { hidden: true });
  /** @type {MachineHost | null} */
  let host = null;

  /** @returns {Promise<boolean>} whether a machine is still on its way */
  async function readMachines() {
    try {
      // What machines run on is read again only while it may change (the image's first build).
      if (host === null || host.image === 'building') {
        host = await api('GET', '/api/dashboard/machines').catch(() => host);
        const notice = host && hostNotice(host);
        hostSlot.hidden = !notice;
        replace(hostSlot, notice);
      }
      machines = await listAll('/api/machines');
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
      return false;
    }
    if (!list.stillShown()) return false;
    draw();
    guide.setMachineCount(machines.length);
    return host?.image === 'building' || machines.some((machine) => !SETTLED.has(machine.status));
  }

  function draw() {
    const destroyed = machines.filter((machine) => machine.status === 'destroyed').length;
    toggle.hidden = destroyed === 0;
    toggleText.textContent = `Show destroyed (${destroyed})`;
    const shown = showDestroyed ? machines : machines.filter((machine) => machine.status !== 'destroyed');
    // Keep the focused action where it was when the table is redrawn by polling.
    const focusedAction = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
    replace(body, shown.length > 0
      ? table('Machines', ['Machine', 'Status', 'Created', ''], shown.map((machine) => row(machine, refresh)))
      : emptyState(machines.length, destroyed));
    if (focusedAction) {
      const again = [...body.querySelectorAll('button')].find((node) => node.getAttribute('aria-label') === focusedAction);
      if (again instanceof HTMLElement) again.focus();
    }
  }

  refresh();
  return [
    pageHeader({ title: 'Machines', description: 'Virtual machines your agents drive through MCP. Machine time is metered while they run.', actions: [create] }),
    h('div', { class: 'stack' },
      hostSlot,
      guide.element,
      card({ title: 'Your machines', id: 'machines', flush: true, actions: [toggle] }, body),
      templatesCard().element),
  ];
}

/**
 * What a user must know of the machines here: simulated ones run nothing (and
 * how to get real ones), or the machine image is in its first build; nothing
 * when machines are real and ready.
 * @param {MachineHost} host
 */
function hostNotice(host) {
  if (host.provider === 'simulated') {
    return alertBox('warning', h('span', null,
      h('strong', null, 'Machines are simulated: they run no commands.'),
      'To get real machines: start Docker on the service’s host and restart the service (MACHINE_PROVIDER=auto, the default, then uses it), or set ',
      h('code', null, 'MACHINE_PROVIDER=docker'), '.'), { id: 'machine-host-notice', 'data-provider': 'simulated' });
  }
  if (host.image === 'building') {
    return alertBox('info', h('span', null,
      h('strong', null, 'The machine image is being built (first start on this host, a few minutes).'),
      'Machines you create meanwhile wait in Starting and boot once it is ready.'), { id: 'machine-host-notice', 'data-image': 'building' });
  }
  if (host.image === 'failed') {
    return alertBox('error', h('span', null,
      h('strong', null, 'The machine image could not be built: machines cannot start.'),
      'The service’s log says why. The operator can build it with ', h('code', null, 'npm run machine-image'), ', then start the machines again.'), { id: 'machine-host-notice', 'data-image': 'failed' });
  }
  return null;
}

/** @param {number} total @param {number} destroyed */
function emptyState(total, destroyed) {
  if (total === 0) {
    return h('div', { class: 'empty' }, h('h3', null, 'No machines yet'), h('p', null, 'Create a machine for an agent to work in. It boots in a few seconds.'));
  }
  return h('div', { class: 'empty' },
    h('h3', null, 'No machines right now'),
    h('p', null, `${destroyed === 1 ? 'One destroyed machine is' : `${destroyed} destroyed machines are`} hidden. Create a machine, or tick “Show destroyed” to see them.`));
}

/**
 * @param {Machine} machine
 * @param {() => Promise<void>} refresh
 */
function row(machine, refresh) {
  /** @param {string} label @param {string} name  the accessible name @param {(button: HTMLButtonElement) => void | Promise<void>} run @param {string} [extra] */
  const action = (label, name, run, extra = '') => {
    const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: `btn btn--small ${extra}`.trim(), 'aria-label': name }, label));
    button.addEventListener('click', () => run(button));
    return button;
  };
  /** @param {MachineVerb} verb @returns {(button: HTMLButtonElement) => Promise<void>} */
  const change = (verb) => async (button) => {
    button.disabled = true;
    try {
      await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/${verb}`);
      toast(`${machine.name}: ${VERB_DONE[verb]}.`);
      await refresh();
    } catch (error) {
      button.disabled = false;
      toast(messageOf(error), 'error');
    }
  };

  const actions = [];
  if (machine.status === 'running') {
    actions.push(
      action('Live view', `Live view of ${machine.name}`, () => openLiveView(machine)),
      // Pause is on the machine's page: a fifth action would not fit a row at 1024 px.
      action('Stop', `Stop ${machine.name}`, change('stop')));
  }
  if (machine.status === 'paused') actions.push(action('Resume', `Resume ${machine.name}`, change('resume')), action('Stop', `Stop ${machine.name}`, change('stop')));
  if (machine.status === 'stopped' || machine.status === 'error') actions.push(action('Start', `Start ${machine.name}`, change('start')));
  if (machine.status !== 'destroyed') {
    actions.push(
      action('New MCP token', `New MCP token for ${machine.name}`, () => issueNewToken(machine)),
      action('Destroy', `Destroy ${machine.name}`, async () => {
        if (await confirmDestroy(machine)) await afterDestroy(machine, refresh);
      }, 'btn--danger-outline'));
  }

  const labels = Object.entries(machine.labels ?? {});
  return h('tr', { dataset: { machineId: machine.id, status: machine.status }, class: machine.status === 'destroyed' ? 'is-muted' : undefined },
    h('td', { class: 'table__main' },
      // The size rides beside the name: four columns fit a 1000 px screen with every action on one line.
      h('div', { class: 'table__primary' }, h('a', { href: `/machines/${encodeURIComponent(machine.id)}` }, machine.name), ' ',
        h('span', { class: 'badge badge--neutral badge--plain', title: 'Size' }, h('span', { class: 'visually-hidden' }, 'Size '), machine.size ?? '—')),
      h('div', { class: 'table__secondary mono' }, machine.id, machine.externalId ? ` · ${machine.externalId}` : ''),
      labels.length > 0 ? h('div', { class: 'chips mt-3' }, labels.map(([key, value]) => h('span', { class: 'chip' }, `${key}=${value}`))) : null),
    cell('Status', statusBadge(machine.status)),
    cell('Created', h('div', null,
      timeElement(machine.createdAt),
      machine.expiresAt ? h('div', { class: 'table__secondary' }, 'Expires ', timeElement(machine.expiresAt)) : null)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, actions)));
}

/**
 * @param {Machine} machine
 * @param {() => Promise<void>} refresh
 */
async function afterDestroy(machine, refresh) {
  toast(`${machine.name} destroyed.`);
  await refresh();
  const next = document.querySelector('.page-header__actions button');
  if (next instanceof HTMLElement) next.focus();
}
