// What a machine's runs, files and processes share: output shown as labelled,
// scrollable blocks (stderr set apart), and the state shown when a machine
// cannot give access to its files or processes (not running, or a provider
// that has none).
import { ApiError, messageOf } from '../api.js';
import { alertBox, h, uid } from '../dom.js';

/** @typedef {'stdout' | 'stderr' | 'note'} Stream */

/** How each stream is labelled. */
const STREAM_LABELS = { stdout: 'Standard output (stdout)', stderr: 'Standard error (stderr)', note: 'Output' };

/**
 * A stream's text in a labelled block that scrolls on its own (and by
 * keyboard); `null` text says the stream was never written, the empty string
 * that nothing was.
 * @param {Stream} stream
 * @param {string | null} text
 * @param {{ label?: string, empty?: string }} [options]
 */
export function outputBlock(stream, text, options = {}) {
  const labelId = uid(`output-${stream}`);
  const label = options.label ?? STREAM_LABELS[stream];
  return h('div', { class: 'field', dataset: { stream } },
    h('span', { class: 'field__label', id: labelId }, label),
    text === null || text === ''
      ? h('p', { class: 'output-empty', dataset: { output: stream } }, options.empty ?? 'Nothing written.')
      : h('pre', { class: `output output--${stream}`, tabindex: '0', role: 'region', 'aria-labelledby': labelId, dataset: { output: stream } }, text));
}

/**
 * A block that grows as output arrives (a process being followed) and stays
 * scrolled to its end unless the reader scrolled up. It keeps the last
 * `limit` characters: a long-running process is not kept whole in the page.
 * @param {Stream} stream
 * @param {number} [limit]
 */
export function growingOutput(stream, limit = 1_000_000) {
  const labelId = uid(`output-${stream}`);
  const pre = h('pre', { class: `output output--${stream} output--tall`, tabindex: '0', role: 'region', 'aria-labelledby': labelId, dataset: { output: stream } });
  const cut = h('p', { class: 'field__hint', hidden: true }, `Only its last ${limit.toLocaleString()} characters are shown.`);
  const element = h('div', { class: 'field', dataset: { stream } }, h('span', { class: 'field__label', id: labelId }, STREAM_LABELS[stream]), pre, cut);
  return {
    element,
    /** @param {string} text */
    append(text) {
      if (text === '') return;
      const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      let all = (pre.textContent ?? '') + text;
      if (all.length > limit) {
        all = all.slice(all.length - limit);
        cut.hidden = false;
      }
      pre.textContent = all;
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    },
  };
}

/**
 * What the files or processes section shows when the API refuses: the
 * provider has none (simulated machines), or the machine is not running.
 * @param {unknown} error
 * @param {'files' | 'processes'} what
 * @param {string} status  the machine's status as last read
 */
export function unavailableState(error, what, status) {
  if (error instanceof ApiError && error.code === 'not_supported') {
    return h('div', { class: 'empty', dataset: { unavailable: 'not_supported' } },
      h('h3', null, `No ${what} on simulated machines`),
      h('p', null, 'This service runs its simulated machine provider, which executes nothing. Real machines, with files and processes, need the service started with ',
        h('code', null, 'MACHINE_PROVIDER=docker'), '.'));
  }
  if (error instanceof ApiError && error.code === 'invalid_state') {
    const why = status === 'starting' ? 'The machine is starting.'
      : status === 'running' ? 'The machine is not running now.'
      : `The machine is ${status}.`;
    return h('div', { class: 'empty', dataset: { unavailable: 'invalid_state' } },
      h('h3', null, why),
      h('p', null, status === 'destroyed'
        ? `Its ${what} went with it.`
        : `Its ${what} can be reached while it runs.${status === 'stopped' || status === 'error' ? ' Start it to reach them.' : ''}`));
  }
  return h('div', { class: 'card__body' }, alertBox('error', messageOf(error)));
}
