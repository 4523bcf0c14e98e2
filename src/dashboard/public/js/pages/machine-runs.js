// A machine's runs: the form that starts one (command, working directory,
// timeout), the list, and a run's details with its stdout and stderr apart,
// its exit code, whether it timed out or lost output, and the screen as it
// ended where the machine kept one.
import { api, messageOf, pagedList } from '../api.js';
import { openDialog } from '../dialog.js';
import { alertBox, badge, cell, h, loading, replace, table } from '../dom.js';
import { formatDate, timeElement } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { outputBlock } from './machine-access.js';
import { runScreenshot } from './machine-screen.js';

/**
 * @typedef {object} Run
 * @property {string} id
 * @property {string} machineId
 * @property {'manual' | 'schedule' | 'webhook'} source
 * @property {string | null} sourceId
 * @property {string} command
 * @property {boolean} stopAfter
 * @property {string} status  pending, running, succeeded, failed
 * @property {number | null} exitCode
 * @property {string | null} output
 * @property {string | null} stdout
 * @property {string | null} stderr
 * @property {boolean} truncated
 * @property {boolean} timedOut
 * @property {string} createdAt
 * @property {string | null} startedAt
 * @property {string | null} finishedAt
 */

const RUNS_PAGE = 20;
const POLL_MS = 2000;
const UNFINISHED = new Set(['pending', 'running']);
const SOURCES = { manual: 'Started by hand or through the API', schedule: 'A schedule', webhook: 'An inbound webhook' };

/** @param {Run} run */
export function runBadge(run) {
  if (run.timedOut) return badge('Timed out', 'danger');
  if (run.status === 'succeeded') return badge('Succeeded', 'success');
  if (run.status === 'failed') return badge('Failed', 'danger');
  if (run.status === 'running') return badge('Running', 'warning', { pulse: true });
  if (run.status === 'pending') return badge('Pending', 'warning', { pulse: true });
  return badge(run.status, 'neutral');
}

/** @param {Run} run */
function exitCodeText(run) {
  if (run.exitCode !== null) return String(run.exitCode);
  if (run.timedOut) return 'None: killed at its timeout';
  return UNFINISHED.has(run.status) ? 'Not yet' : 'None: it did not run';
}

/**
 * @param {string} machineId
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function runsSection(machineId, onCleanup) {
  const base = `/api/machines/${encodeURIComponent(machineId)}/runs`;
  const body = h('div', null, loading('Loading runs…'));
  const footer = h('div');

  const command = field({ label: 'Command', name: 'command', required: true, mono: true, maxlength: 10000, placeholder: 'e.g. uname -a', hint: 'Runs with /bin/sh -c in the machine.' });
  const cwd = field({ label: 'Working directory', name: 'cwd', optional: true, mono: true, placeholder: '/root', maxlength: 4096 });
  cwd.input.setAttribute('pattern', '/.*');
  cwd.input.title = 'An absolute path, starting with /';
  const timeout = field({ label: 'Timeout in seconds', name: 'timeoutMs', type: 'number', optional: true, placeholder: '600', inputmode: 'numeric', hint: 'From 1 to 3600; killed past it.' });
  Object.assign(timeout.input, { min: '1', max: '3600', step: '1' });
  const { form } = simpleForm({
    label: 'Run a command',
    fields: [command.wrapper, h('div', { class: 'form-row' }, cwd.wrapper, timeout.wrapper)],
    submitLabel: 'Run command',
    onSubmit: async () => {
      /** @type {Record<string, unknown>} */
      const input = { command: command.input.value };
      if (cwd.input.value.trim()) input.cwd = cwd.input.value.trim();
      if (timeout.input.value) input.timeoutMs = Math.round(Number(timeout.input.value) * 1000);
      /** @type {Run} */
      const run = await api('POST', base, input);
      toast('Run started.');
      await refresh();
      showRun(run);
    },
  });

  const element = card({
    title: 'Runs',
    id: 'runs',
    flush: true,
    description: 'Commands run to their end: each keeps its exit code, its standard output and its standard error.',
  }, h('div', { class: 'card__body' }, form), body, footer);

  /** @type {ReturnType<typeof pagedList<Run>>} */
  const runs = pagedList((cursor) => api('GET', `${base}?${new URLSearchParams({ limit: String(RUNS_PAGE), ...(cursor ? { cursor } : {}) })}`));
  const { refresh } = poll(onCleanup, readRuns, POLL_MS);

  /** @returns {Promise<boolean>} whether a run shown has not ended */
  async function readRuns() {
    try {
      await runs.read();
      draw();
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
      return false;
    }
    return runs.shown.some((run) => UNFINISHED.has(run.status));
  }

  async function loadMore() {
    try {
      await runs.more();
      draw();
    } catch (error) {
      toast(messageOf(error), 'error');
    }
  }

  function draw() {
    // Polling redraws the rows: the focused button stays focused.
    const focused = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
    replace(body, runs.shown.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'No runs yet'), h('p', null, 'Run a command above; its output appears here.'))
      : table('Runs', ['Command', 'Status', 'Exit code', 'Created', ''], runs.shown.map(row)));
    const again = focused ? [...body.querySelectorAll('button')].find((button) => button.getAttribute('aria-label') === focused) : undefined;
    again?.focus();
    replace(footer, runs.nextCursor
      ? h('div', { class: 'card__footer' }, h('button', { type: 'button', class: 'btn btn--small', onclick: loadMore }, 'Load older runs'))
      : null);
  }

  refresh();
  return { element, refresh };
}

/** @param {Run} run */
function row(run) {
  const details = h('button', { type: 'button', class: 'btn btn--small', 'aria-label': `Output of run ${run.id}` }, 'Output');
  details.addEventListener('click', () => showRun(run));
  return h('tr', { dataset: { runId: run.id, status: run.status } },
    h('td', { class: 'table__main' },
      h('div', { class: 'table__primary mono truncate', title: run.command }, run.command),
      h('div', { class: 'table__secondary mono' }, run.id)),
    cell('Status', runBadge(run)),
    cell('Exit code', run.exitCode === null ? h('span', { class: 'muted' }, '—') : h('span', { class: 'mono' }, String(run.exitCode))),
    cell('Created', timeElement(run.createdAt)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, details)));
}

/**
 * A run's details; while it is unfinished the dialog reads it again until it ends.
 * @param {Run} first
 */
export function showRun(first) {
  const content = h('div', { class: 'stack stack--tight' });
  /** @type {HTMLElement | null} Asked for once the run has ended. */
  let screen = null;
  /** What closing the dialog ends: the reads of a run that has not ended. @type {Array<() => void>} */
  const closing = [];
  const following = poll((cleanup) => closing.push(cleanup), readRun, POLL_MS);
  const dialog = openDialog({
    title: 'Run output',
    size: 'widest',
    initialFocus: 'close',
    onClose: () => {
      for (const cleanup of closing) cleanup();
    },
    content: [content, h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Close'))],
  });

  /** @param {Run} run */
  function draw(run) {
    const finished = !UNFINISHED.has(run.status);
    const rows = [
      ['Command', h('code', { class: 'break' }, run.command)],
      ['Status', runBadge(run)],
      ['Exit code', h('span', { dataset: { exitCode: run.exitCode === null ? '' : String(run.exitCode) } }, exitCodeText(run))],
      ['Timed out', run.timedOut ? 'Yes: killed at its timeout' : finished ? 'No' : 'Not yet'],
      ['Started', run.startedAt ? formatDate(run.startedAt) : 'Not yet'],
      ['Finished', run.finishedAt ? formatDate(run.finishedAt) : 'Not yet'],
      ['Source', SOURCES[run.source] ?? run.source],
      ['Run ID', h('code', null, run.id)],
    ];
    // Neither stream when the command never ran: the output says why.
    const streams = run.stdout === null && run.stderr === null
      ? (finished ? [outputBlock('note', run.output, { label: 'Why it did not run', empty: 'No reason was recorded.' })] : [h('p', { class: 'muted' }, 'The output appears when the run ends.')])
      : [outputBlock('stdout', run.stdout), outputBlock('stderr', run.stderr)];
    if (finished && screen === null) screen = runScreenshot(run, following.stillShown);
    replace(content,
      h('dl', { class: 'kv' }, rows.map(([term, value]) => [h('dt', null, term), h('dd', null, value)])),
      run.truncated ? alertBox('warning', 'Output past 1 MiB per stream was not kept: what follows is its beginning.', { 'data-truncated': '' }) : null,
      ...streams,
      screen);
  }

  /** @returns {Promise<boolean>} whether the run has still not ended */
  async function readRun() {
    /** @type {Run} */
    let run;
    try {
      run = await api('GET', `/api/runs/${encodeURIComponent(first.id)}`);
    } catch (error) {
      if (following.stillShown()) replace(content, alertBox('error', messageOf(error)));
      return false;
    }
    draw(run);
    return UNFINISHED.has(run.status);
  }

  draw(first);
  if (UNFINISHED.has(first.status)) following.later();
  return dialog;
}
