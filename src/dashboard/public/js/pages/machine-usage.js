// A running machine's usage over the last hour: CPU, memory,
// disk and network as four small charts drawn here in SVG, read every 5 s
// (only the samples after the last one shown) while the machine runs.
import { api, messageOf } from '../api.js';
import { alertBox, h, loading, replace } from '../dom.js';
import { formatBytes } from '../format.js';
import { card } from '../layout.js';
import { poll } from '../poll.js';

/**
 * @typedef {object} Sample
 * @property {string} at
 * @property {number} cpuPercent
 * @property {number} memoryBytes
 * @property {number} memoryLimitBytes
 * @property {number} diskBytes
 * @property {number} diskLimitBytes
 * @property {number} pids
 * @property {number} rxBytes
 * @property {number} txBytes
 */

/** The machine samples every 5 s. */
const POLL_MS = 5000;
const HOUR_MS = 3_600_000;
const WIDTH = 300;
const HEIGHT = 80;
const SVG = 'http://www.w3.org/2000/svg';

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attributes
 * @param {...Element} children
 */
function svg(tag, attributes, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  element.append(...children);
  return element;
}

/** "12.5 KiB/s" @param {number} bytesPerSecond */
const formatRate = (bytesPerSecond) => `${formatBytes(Math.round(bytesPerSecond))}/s`;

/** @param {number} percent */
const formatPercent = (percent) => `${percent.toFixed(percent < 10 ? 1 : 0)} %`;

/**
 * One series: a value per time, drawn against a top value.
 * @typedef {{ name: string, points: { at: number, value: number }[] }} Series
 */

/**
 * A chart of one or two series over the span of the samples: a line each, its
 * newest value in words (caption and the picture's label), and the figures in
 * data attributes (`data-latest`, `data-points`, `data-max`) for whoever reads the page.
 * @param {{ key: string, title: string, series: Series[], top: number, describe: (value: number) => string, legend?: boolean }} chart
 */
function chartFigure({ key, title, series, top, describe, legend = false }) {
  const all = series.flatMap((one) => one.points);
  const first = Math.min(...all.map((point) => point.at));
  const last = Math.max(...all.map((point) => point.at));
  const span = Math.max(last - first, 1);
  const x = (/** @type {number} */ at) => ((at - first) / span) * WIDTH;
  const y = (/** @type {number} */ value) => HEIGHT - (Math.min(Math.max(value, 0), top) / top) * (HEIGHT - 2) - 1;
  const latest = series.map((one) => one.points.at(-1)?.value ?? 0);
  const words = series.map((one, i) => `${series.length > 1 ? `${one.name} ` : ''}${describe(latest[i] ?? 0)}`).join(', ');
  const lines = series.map((one, i) => svg('polyline', {
    class: `usage-chart__line usage-chart__line--${i}`,
    points: one.points.map((point) => `${x(point.at).toFixed(1)},${y(point.value).toFixed(1)}`).join(' '),
    'data-series': one.name,
  }));
  const picture = svg('svg', { class: 'usage-chart__picture', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `${title}: ${words}` },
    svg('line', { class: 'usage-chart__axis', x1: 0, y1: HEIGHT - 0.5, x2: WIDTH, y2: HEIGHT - 0.5 }),
    ...lines);
  return h('figure', { class: 'usage-chart', dataset: { chart: key, latest: String(latest[0] ?? 0), points: String(all.length), max: String(Math.max(...series[0]?.points.map((point) => point.value) ?? [0])) } },
    h('figcaption', { class: 'usage-chart__caption' }, h('span', { class: 'usage-chart__title' }, title), h('span', { class: 'usage-chart__value' }, words)),
    picture,
    h('div', { class: 'usage-chart__scale' },
      h('span', null, `max ${describe(top)}`),
      legend ? h('span', { class: 'usage-chart__legend' }, series.map((one, i) => h('span', { class: `usage-chart__key usage-chart__key--${i}` }, one.name))) : null));
}

/**
 * The four charts of the samples (two at least: the network's rate is the difference between two).
 * @param {Sample[]} samples
 */
function charts(samples) {
  const at = (/** @type {Sample} */ sample) => Date.parse(sample.at);
  const newest = /** @type {Sample} */ (samples.at(-1));
  const rates = samples.slice(1).map((sample, i) => {
    const before = /** @type {Sample} */ (samples[i]);
    const seconds = Math.max((at(sample) - at(before)) / 1000, 1);
    // A counter that went back (the machine restarted) starts again from zero.
    const rate = (/** @type {number} */ now, /** @type {number} */ then) => (now >= then ? (now - then) / seconds : now / seconds);
    return { at: at(sample), rx: rate(sample.rxBytes, before.rxBytes), tx: rate(sample.txBytes, before.txBytes) };
  });
  const topRate = Math.max(1024, ...rates.map((rate) => Math.max(rate.rx, rate.tx)));
  return [
    chartFigure({ key: 'cpu', title: 'CPU', top: 100, describe: formatPercent, series: [{ name: 'CPU', points: samples.map((s) => ({ at: at(s), value: s.cpuPercent })) }] }),
    chartFigure({ key: 'memory', title: `Memory of ${formatBytes(newest.memoryLimitBytes)}`, top: newest.memoryLimitBytes, describe: formatBytes, series: [{ name: 'Memory', points: samples.map((s) => ({ at: at(s), value: s.memoryBytes })) }] }),
    chartFigure({ key: 'disk', title: `Disk of ${formatBytes(newest.diskLimitBytes)}`, top: newest.diskLimitBytes, describe: formatBytes, series: [{ name: 'Disk', points: samples.map((s) => ({ at: at(s), value: s.diskBytes })) }] }),
    chartFigure({
      key: 'network',
      title: 'Network',
      top: topRate,
      describe: formatRate,
      legend: true,
      series: [{ name: 'in', points: rates.map((rate) => ({ at: rate.at, value: rate.rx })) }, { name: 'out', points: rates.map((rate) => ({ at: rate.at, value: rate.tx })) }],
    }),
  ];
}

/**
 * @param {string} machineId
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function usageSection(machineId, onCleanup) {
  const path = `/api/machines/${encodeURIComponent(machineId)}/metrics`;
  const body = h('div', { class: 'card__body' }, loading('Loading usage…'));
  const facts = h('p', { class: 'usage__facts' });
  const element = card({
    title: 'Usage',
    id: 'usage',
    description: 'CPU, memory, disk and network over the last hour, sampled every 5 seconds while the machine runs.',
  }, body);
  /** @type {Sample[]} */
  let samples = [];
  let status = '';
  const reading = poll(onCleanup, read, POLL_MS);

  /** @returns {Promise<boolean>} read again while the machine runs */
  async function read() {
    if (status !== 'running') return false;
    const last = samples.at(-1);
    try {
      /** @type {{ data: Sample[] }} */
      const answer = await api('GET', last ? `${path}?${new URLSearchParams({ since: last.at })}` : path);
      if (!reading.stillShown() || status !== 'running') return false;
      const cutoff = Date.now() - HOUR_MS;
      samples = [...samples, ...answer.data].filter((sample) => Date.parse(sample.at) >= cutoff);
      draw();
    } catch (error) {
      replace(body, alertBox('error', messageOf(error)));
    }
    return true;
  }

  function draw() {
    if (samples.length < 2) {
      replace(body, h('p', { class: 'usage__note', dataset: { usage: 'waiting' } }, 'No usage yet: a running machine is sampled every 5 seconds, and the charts show from its second sample. Machines of the simulated provider have none.'));
      return;
    }
    const newest = /** @type {Sample} */ (samples.at(-1));
    replace(facts, `${newest.pids} processes · ${formatBytes(newest.rxBytes)} received, ${formatBytes(newest.txBytes)} sent since it started`);
    replace(body, h('div', { class: 'usage-grid' }, charts(samples)), facts);
  }

  return {
    element,
    /** @param {string} next */
    setStatus(next) {
      if (next === status) return;
      status = next;
      samples = [];
      if (status === 'running') {
        replace(body, loading('Loading usage…'));
        reading.refresh();
      } else {
        reading.pause();
        replace(body, h('p', { class: 'usage__note', dataset: { usage: 'not-running' } }, 'Usage shows while the machine runs: its samples live in the machine and end with it.'));
      }
    },
  };
}
