// Dates, durations and user agents, written for people.

const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const precise = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });

const UNITS = /** @type {const} */ ([
  ['year', 365 * 24 * 3600],
  ['month', 30 * 24 * 3600],
  ['week', 7 * 24 * 3600],
  ['day', 24 * 3600],
  ['hour', 3600],
  ['minute', 60],
]);

/** @param {string} iso */
export function formatDate(iso) {
  return absolute.format(new Date(iso));
}

/** To the second, without the year: "Nov 22, 10:00:07 AM" (attempts seconds apart). @param {string} iso */
export function formatPrecise(iso) {
  return precise.format(new Date(iso));
}

/** "3 minutes ago", "in 2 hours", "just now". @param {string} iso */
export function formatRelative(iso) {
  const seconds = (new Date(iso).getTime() - Date.now()) / 1000;
  // A server clock a little ahead of this one must not read "in 1 minute" for something that just happened.
  if (seconds > 0 && seconds < 300) return 'just now';
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  }
  return 'just now';
}

/**
 * A <time> element that reads relative and shows the exact time on hover.
 * @param {string | null | undefined} iso
 * @param {string} [whenMissing]
 */
export function timeElement(iso, whenMissing = '—') {
  const element = document.createElement('time');
  if (!iso) {
    element.textContent = whenMissing;
    return element;
  }
  element.dateTime = iso;
  element.title = formatDate(iso);
  element.textContent = formatRelative(iso);
  return element;
}

/** "Chrome on Linux" from a User-Agent header. @param {string | null} userAgent */
export function describeUserAgent(userAgent) {
  if (!userAgent) return 'Unknown device';
  const browser =
    /Edg\//.test(userAgent) ? 'Edge'
    : /OPR\//.test(userAgent) ? 'Opera'
    : /Firefox\//.test(userAgent) ? 'Firefox'
    : /(Chrome|Chromium|HeadlessChrome)\//.test(userAgent) ? 'Chrome'
    : /Safari\//.test(userAgent) ? 'Safari'
    : /^curl\//.test(userAgent) ? 'curl'
    : null;
  const system =
    /iPhone|iPad|iOS/.test(userAgent) ? 'iOS'
    : /Android/.test(userAgent) ? 'Android'
    : /Mac OS X|Macintosh/.test(userAgent) ? 'macOS'
    : /Windows/.test(userAgent) ? 'Windows'
    : /CrOS/.test(userAgent) ? 'ChromeOS'
    : /Linux/.test(userAgent) ? 'Linux'
    : null;
  if (browser && system) return `${browser} on ${system}`;
  return browser ?? system ?? userAgent.slice(0, 60);
}

/** @param {number} count @param {string} singular @param {string} [plural] */
export function plural(count, singular, plural = `${singular}s`) {
  return `${count} ${count === 1 ? singular : plural}`;
}

const BYTE_UNITS = ['KiB', 'MiB', 'GiB', 'TiB'];

/** "812 B", "4.2 KiB", "100 MiB": sizes in the units the API's limits are written in. @param {number} bytes */
export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes;
  let unit = '';
  for (const next of BYTE_UNITS) {
    value /= 1024;
    unit = next;
    if (value < 1024) break;
  }
  return `${value < 10 ? value.toFixed(1).replace(/\.0$/, '') : Math.round(value)} ${unit}`;
}
