// A running machine's background processes: start one, the list with each
// one's status and exit code, and a view of one that follows its output as it
// comes (a long poll that ends when the process does or the view closes),
// sends it input, and signals it.
import { api, ApiError, messageOf } from '../api.js';
import { openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table, uid } from '../dom.js';
import { formatDate, timeElement } from '../format.js';
import { field, handleSubmit, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { growingOutput, unavailableState } from './machine-access.js';

/**
 * @typedef {object} MachineProcess
 * @property {string} id
 * @property {string} command
 * @property {number} pid
 * @property {'running' | 'exited'} status
 * @property {number | null} exitCode
 * @property {'exited' | 'machine-stopped' | 'lost' | null} endReason
 * @property {string} startedAt
 */

/** While one is running, the list is read again this often (an exit shows without a click). */
const POLL_MS = 5000;
/** How long one read of the output waits for more (the API allows 30 s). */
const FOLLOW_WAIT_MS = 25_000;
/** A read that brought nothing back at once is not repeated sooner than this. */
const IDLE_READ_MS = 1000;

const SIGNALS = /** @type {const} */ ([
  ['INT', 'Interrupt (INT)'],
  ['HUP', 'Hang up (HUP)'],
  ['TERM', 'Terminate (TERM)'],
  ['KILL', 'Kill (KILL)'],
]);

/** @param {{ status: string, exitCode: number | null, endReason: string | null }} process */
function processBadge(process) {
  if (process.status === 'running') return badge('Running', 'success', { pulse: true });
  if (process.endReason === 'machine-stopped') return badge('Machine stopped', 'neutral');
  if (process.endReason === 'lost') return badge('Lost', 'warning');
  if (process.exitCode === null) return badge('Ended', 'neutral');
  return badge(`Exited ${process.exitCode}`, process.exitCode === 0 ? 'neutral' : 'danger');
}

/**
 * Why an ended process ended, in a sentence.
 * @param {number | null} exitCode
 * @param {string | null} endReason
 */
function endedText(exitCode, endReason) {
  if (endReason === 'machine-stopped') return ' The machine stopped, which ended it.';
  if (endReason === 'lost') return ' Its supervisor in the machine died: what became of it is unknown.';
  return exitCode === null ? ' No exit code: a signal ended it.' : ` Exit code ${exitCode}.`;
}

/** @param {string} command */
const shortCommand = (command) => (command.length > 60 ? `${command.slice(0, 59)}…` : command);

/**
 * @param {string} machineId
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function processesSection(machineId, onCleanup) {
  const base = `/api/machines/${encodeURIComponent(machineId)}/processes`;
  let status = '';
  /** @type {MachineProcess[]} */
  let processes = [];
  const list = poll(onCleanup, readProcesses, POLL_MS);
  const refresh = list.refresh;

  const body = h('div', null, loading('Loading processes…'));
  const command = field({ label: 'Command', name: 'command', required: true, mono: true, maxlength: 10000, placeholder: 'e.g. python3 -m http.server 8000', hint: 'Runs in the background with /bin/sh -c until it ends or the machine stops.' });
  const { form } = simpleForm({
    label: 'Start a process',
    fields: [command.wrapper],
    submitLabel: 'Start process',
    onSubmit: async () => {
      /** @type {MachineProcess} */
      const started = await api('POST', base, { command: command.input.value });
      toast(`Process ${started.pid} started.`);
      command.input.value = '';
      await refresh();
      openProcess(started);
    },
  });
  const toolbar = h('div', { class: 'card__body' }, form);
  const element = card({
    title: 'Processes',
    id: 'processes',
    flush: true,
    description: 'Long-running commands in the background: follow their output, send them input, signal them.',
  }, toolbar, body);

  /** @returns {Promise<boolean>} whether one is still running */
  async function readProcesses() {
    try {
      /** @type {{ data: MachineProcess[] }} */
      const page = await api('GET', base);
      processes = [...page.data].reverse();
      toolbar.hidden = false;
      draw();
    } catch (error) {
      toolbar.hidden = error instanceof ApiError && (error.code === 'not_supported' || error.code === 'invalid_state');
      replace(body, unavailableState(error, 'processes', status));
      return false;
    }
    return processes.some((process) => process.status === 'running');
  }

  function draw() {
    const focused = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
    replace(body, processes.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'No processes'), h('p', null, 'Start one above: a server, a watcher, anything that keeps running.'))
      : table('Processes', ['Command', 'Status', 'Started', ''], processes.map(row)));
    const again = focused ? [...body.querySelectorAll('button')].find((button) => button.getAttribute('aria-label') === focused) : undefined;
    again?.focus();
  }

  /** @param {MachineProcess} process */
  function row(process) {
    const view = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Output of ${shortCommand(process.command)} (process ${process.pid})` }, 'Output');
    view.addEventListener('click', () => openProcess(process));
    return h('tr', { dataset: { processId: process.id, status: process.status } },
      h('td', { class: 'table__main' },
        h('div', { class: 'table__primary mono truncate', title: process.command }, process.command),
        h('div', { class: 'table__secondary mono' }, `PID ${process.pid} · ${process.id}`)),
      cell('Status', processBadge(process)),
      cell('Started', timeElement(process.startedAt)),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, view)));
  }

  /** @param {MachineProcess} process */
  function openProcess(process) {
    openProcessView(base, process, () => {
      if (list.stillShown()) refresh();
    });
  }

  /** The machine's status changed (or is first known): read the list again. @param {string} next */
  function setStatus(next) {
    if (next === status) return;
    status = next;
    refresh();
  }

  return { element, setStatus };
}

/**
 * One process: its output as it comes, input, signals. The output is read
 * with a long poll from where the last read ended; closing the view aborts it.
 * @param {string} base  the machine's processes path
 * @param {MachineProcess} process
 * @param {() => void} onEnded  the process ended while shown (the list shows it)
 */
function openProcessView(base, process, onEnded) {
  const path = `${base}/${encodeURIComponent(process.id)}`;
  const stop = new AbortController();
  const stdout = growingOutput('stdout');
  const stderr = growingOutput('stderr');
  const state = h('span', { role: 'status', class: 'process-state' }, processBadge(process));
  const problem = h('div');

  const input = field({ label: 'Input', name: 'data', mono: true });
  const inputHint = h('div', { class: 'field__hint upload__hint', id: uid('input-hint') }, 'Sent to its standard input, followed by a new line.');
  input.input.setAttribute('aria-describedby', inputHint.id);
  input.input.setAttribute('data-autofocus', '');
  input.input.autocomplete = 'off';
  const send = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'btn' }, 'Send'));
  const inputError = h('div');
  const inputForm = /** @type {HTMLFormElement} */ (h('form', { class: 'upload', 'aria-label': 'Send input' },
    h('div', { class: 'upload__field' }, input.wrapper), send, inputHint, h('div', { class: 'upload__error' }, inputError)));
  handleSubmit(inputForm, send, inputError, async () => {
    await api('POST', `${path}/input`, { data: `${input.input.value}\n` });
    input.input.value = '';
    input.input.focus();
  });
  const signals = h('div', { class: 'actions', role: 'group', 'aria-label': 'Send a signal' },
    SIGNALS.map(([signal, label]) => {
      const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: `btn btn--small${signal === 'KILL' ? ' btn--danger-outline' : ''}` }, label));
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          await api('POST', `${path}/signal`, { signal });
          toast(`${signal} sent to process ${process.pid}.`);
        } catch (error) {
          toast(messageOf(error), 'error');
        } finally {
          button.disabled = false;
        }
      });
      return button;
    }));
  const controls = h('div', { class: 'stack stack--tight', hidden: process.status !== 'running' }, inputForm,
    h('div', { class: 'field' }, h('span', { class: 'field__label' }, 'Signals'), signals));

  const dialog = openDialog({
    title: 'Process',
    size: 'widest',
    initialFocus: process.status === 'running' ? 'content' : 'close',
    onClose: () => stop.abort(),
    content: [
      h('dl', { class: 'kv' },
        h('dt', null, 'Command'), h('dd', null, h('code', { class: 'break' }, process.command)),
        h('dt', null, 'Process ID'), h('dd', null, h('span', { class: 'mono' }, String(process.pid)), h('span', { class: 'muted small' }, process.id)),
        h('dt', null, 'Started'), h('dd', null, formatDate(process.startedAt)),
        h('dt', null, 'Status'), h('dd', null, state)),
      problem,
      stdout.element,
      stderr.element,
      controls,
      h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Close')),
    ],
  });

  /**
   * @param {number | null} exitCode
   * @param {string | null} endReason
   */
  function ended(exitCode, endReason) {
    replace(state, processBadge({ status: 'exited', exitCode, endReason }),
      h('span', { class: 'muted small' }, endedText(exitCode, endReason)));
    state.dataset.exitCode = exitCode === null ? '' : String(exitCode);
    const focusWasInside = controls.contains(document.activeElement);
    controls.hidden = true;
    if (focusWasInside) /** @type {HTMLElement | null} */ (dialog.element.querySelector('.dialog__footer button'))?.focus();
    if (process.status === 'running') onEnded();
  }

  async function follow() {
    let offset = 0;
    let waitMs = 0;
    while (!stop.signal.aborted) {
      /** @type {{ stdout: string, stderr: string, offset: number, running: boolean, exitCode: number | null, endReason: string | null }} */
      let read;
      try {
        read = await api('GET', `${path}/output?${new URLSearchParams({ offset: String(offset), waitMs: String(waitMs) })}`, undefined, {}, { signal: stop.signal });
      } catch (error) {
        if (!stop.signal.aborted) replace(problem, alertBox('error', h('span', null, h('strong', null, 'The output is no longer followed.'), messageOf(error))));
        return;
      }
      const moved = read.offset !== offset;
      stdout.append(read.stdout);
      stderr.append(read.stderr);
      offset = read.offset;
      if (!read.running && !moved) {
        ended(read.exitCode, read.endReason);
        return;
      }
      // Still running: wait for more. Ended: read on at once until everything it wrote is shown.
      waitMs = read.running ? FOLLOW_WAIT_MS : 0;
      if (read.running && !moved) await new Promise((resolve) => setTimeout(resolve, IDLE_READ_MS));
    }
  }

  follow();
  return dialog;
}
