// One machine: its status (start, stop, pause and resume), saving it as a template and forking it, its screen and
// terminal, its runs, and while it runs its files and background processes,
// its previews, its events, and its usage over the last hour; its settings (idle stop).
import { api, ApiError, messageOf } from '../api.js';
import { alertBox, h, loading, replace } from '../dom.js';
import { formatDate } from '../format.js';
import { pageHeader } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { machineEventsSection } from './machine-events.js';
import { networkSection } from './machine-network.js';
import { filesSection } from './machine-files.js';
import { previewsSection } from './machine-previews.js';
import { processesSection } from './machine-processes.js';
import { runsSection } from './machine-runs.js';
import { screenSection } from './machine-screen.js';
import { settingsSection } from './machine-settings.js';
import { terminalSection } from './machine-terminal.js';
import { usageSection } from './machine-usage.js';
import { statusBadge, VERB_DONE } from './machines.js';
import { openForkDialog, openSaveTemplateDialog } from './machine-templates.js';

/** @typedef {import('../routes.js').PageContext} PageContext */
/** @typedef {import('./machines.js').Machine} Machine */

const POLL_MS = 2000;
/** Statuses that stay until someone acts; any other is watched. */
const SETTLED = new Set(['running', 'paused', 'stopped', 'error', 'destroyed']);

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
      const terminal = terminalSection(machine, onCleanup);
      const events = machineEventsSection(machine.id);
      const usage = usageSection(machine.id, onCleanup);
      const previews = previewsSection(machine.id);
      const network = networkSection(machine);
      const settings = settingsSection(machine, load);
      // The screen, terminal, files, processes, previews, network policy, events and usage are read again whenever the machine's status changes.
      watchers = [screen, terminal, files, processes, previews, events, usage, network];
      replace(sections, screen.element, terminal.element, runs.element, files.element, processes.element, previews.element, network.element, events.element, usage.element, settings.element);
      started = true;
    }
    for (const watcher of watchers) watcher.setStatus(machine.status);
    return !SETTLED.has(machine.status);
  }

  /** @param {Machine} machine */
  function drawHeader(machine) {
    const focused = document.activeElement instanceof HTMLElement && header.contains(document.activeElement) ? document.activeElement.textContent : null;
    /** @param {import('./machines.js').MachineVerb} verb */
    const change = (verb) => {
      const primary = verb === 'start' || verb === 'resume';
      const label = verb.charAt(0).toUpperCase() + verb.slice(1);
      const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: primary ? 'btn btn--primary' : 'btn' }, label));
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          await api('POST', `${path}/${verb}`);
          toast(`${machine.name}: ${VERB_DONE[verb]}.`);
          await load();
        } catch (error) {
          button.disabled = false;
          toast(messageOf(error), 'error');
        }
      });
      return button;
    };
    const actions = [];
    if (machine.status === 'running') actions.push(change('pause'), change('stop'));
    if (machine.status === 'paused') actions.push(change('resume'), change('stop'));
    if (machine.status === 'stopped' || machine.status === 'error') actions.push(change('start'));
    // Its disk can be copied while it runs (frozen for the moment), is paused or is stopped.
    if (machine.status === 'running' || machine.status === 'paused' || machine.status === 'stopped') {
      /** @param {string} label @param {() => void} open */
      const dialogButton = (label, open) => {
        const button = h('button', { type: 'button', class: 'btn' }, label);
        button.addEventListener('click', open);
        return button;
      };
      actions.push(dialogButton('Save as template', () => openSaveTemplateDialog(machine)), dialogButton('Fork', () => openForkDialog(machine)));
    }
    replace(header, pageHeader({
      title: machine.name,
      oneLine: true,
      breadcrumb: { href: '/machines', label: 'Machines' },
      description: h('span', { class: 'machine-facts' },
        statusBadge(machine.status),
        h('span', null, `Size ${machine.size}`),
        h('span', { class: 'mono break' }, machine.id),
        machine.expiresAt ? h('span', null, `Expires ${formatDate(machine.expiresAt)}`) : null,
        machine.autoStopMinutes === undefined ? null : h('span', { 'data-idle-stop': '' }, machine.autoStopMinutes === 0 ? 'Never idle-stops' : `Stops after ${machine.autoStopMinutes} idle min`)),
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
