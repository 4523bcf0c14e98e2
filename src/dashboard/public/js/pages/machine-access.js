// What a machine's runs, files and processes share: output shown as labelled,
// scrollable blocks (stderr set apart).
import { h, uid } from '../dom.js';

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
