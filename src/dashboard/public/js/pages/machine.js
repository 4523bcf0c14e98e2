// One machine: its status (start and stop), its screen (CONTRACT 16), its
// runs, and while it runs its files and background processes (CONTRACT 15),
// and its events.
import { api, ApiError, messageOf } from '../api.js';
import { alertBox, h, loading, replace } from '../dom.js';
import { formatDate } from '../format.js';
import { pageHeader } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { machineEventsSection } from './machine-events.js';
import { filesSection } from './machine-files.js';
import { processesSection } from './machine-processes.js';
import { runsSection } from './machine-runs.js';
import { screenSection } from './machine-screen.js';
import { statusBadge } from './machines.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('./machines.js').Machine} Machine */

const POLL_MS = 2000;
/** Statuses that stay until someone acts; any other is watched. */
const SETTLED = new Set(['running', 'stopped', 'error', 'destroyed']);

/** @param {PageContext} context */
export function machinePage({ params, onCleanup }) {
  const id = params.id ?? '';
  const path = `/api/machines/${encodeURIComponent(id)}`;
  const header = h('div', null, loading('Loading machine…'));
  const sections = h('div', { class: 'stack' });
  /** @type {{ setStatus: (status: string) => void }[]} */
  let watchers = [];
  let started = false;
  const watching = poll(onCleanup, readMachine, POLL_MS);
  const load = watching.refresh;

  /** @returns {Promise<boolean>} whether to read it again: its status is on its way, or a read failed once it was shown */
  async function readMachine() {
    /** @type {Machine} */
    let machine;
    try {
      machine = await api('GET', path);
    } catch (error) {
      if (!watching.stillShown()) return false;
      const missing = error instanceof ApiError && error.status === 404;
      if (started && !missing) return true;
      replace(header,
        pageHeader({ title: missing ? 'Machine not found' : 'Machine', breadcrumb: { href: '/machines', label: 'Machines' } }),
        alertBox('error', missing ? 'There is no machine with this ID in your account.' : messageOf(error)));
      replace(sections);
      return false;
    }
    if (!watching.stillShown()) return false;
    drawHeader(machine);
    if (!started) {
      const runs = runsSection(machine.id, onCleanup);
      const files = filesSection(machine.id);
      const processes = processesSection(machine.id, onCleanup);
      const screen = screenSection(machine, onCleanup);
      const events = machineEventsSection(machine.id);
      // The screen, files, processes and events are read again whenever the machine's status changes.
      watchers = [screen, files, processes, events];
      replace(sections, screen.element, runs.element, files.element, processes.element, events.element);
      started = true;
    }
    for (const watcher of watchers) watcher.setStatus(machine.status);
    return !SETTLED.has(machine.status);
  }

  /** @param {Machine} machine */
  function drawHeader(machine) {
    const focused = document.activeElement instanceof HTMLElement && header.contains(document.activeElement) ? document.activeElement.textContent : null;
    /** @param {'start' | 'stop'} verb */
    const change = (verb) => {
      const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: verb === 'start' ? 'btn btn--primary' : 'btn' }, verb === 'start' ? 'Start' : 'Stop'));
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          await api('POST', `${path}/${verb}`);
          toast(`${machine.name}: ${verb === 'start' ? 'starting' : 'stopping'}.`);
          await load();
        } catch (error) {
          button.disabled = false;
          toast(messageOf(error), 'error');
        }
      });
      return button;
    };
    const actions = [];
    if (machine.status === 'running') actions.push(change('stop'));
    if (machine.status === 'stopped' || machine.status === 'error') actions.push(change('start'));
    replace(header, pageHeader({
      title: machine.name,
      oneLine: true,
      breadcrumb: { href: '/machines', label: 'Machines' },
      description: h('span', { class: 'machine-facts' },
        statusBadge(machine.status),
        h('span', null, `Size ${machine.size}`),
        h('span', { class: 'mono break' }, machine.id),
        machine.expiresAt ? h('span', null, `Expires ${formatDate(machine.expiresAt)}`) : null),
      actions,
    }));
    header.dataset.status = machine.status;
    document.title = `${machine.name} · Machine Platform`;
    // A redraw keeps focus on the action it was on (Stop becomes Start once stopped: focus goes to the new one).
    if (focused !== null) (/** @type {HTMLElement | null} */ (header.querySelector('.page-header__actions button')) ?? header.querySelector('h1'))?.focus();
  }

  load();
  return [header, sections];
}
