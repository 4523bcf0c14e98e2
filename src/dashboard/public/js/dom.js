// DOM building without HTML strings: every text goes in through textContent,
// so nothing the API returns can become markup (the CSP's Trusted Types would
// refuse HTML sinks anyway).

/**
 * @typedef {Node | string | number | null | undefined | false | unknown[]} Child  (arrays nest children)
 */

/**
 * Creates an element. `props`: `class`, `text`, `on<event>` handlers, `dataset`,
 * booleans (true sets the attribute, false/null/undefined leaves it out), other attributes.
 * @param {string} tag
 * @param {Record<string, unknown> | null} [props]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') element.className = String(value);
    else if (key === 'text') element.textContent = String(value);
    else if (key === 'dataset') Object.assign(element.dataset, value);
    else if (key.startsWith('on')) {
      // Never an inline handler attribute: the CSP refuses them, and text must not become code.
      if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
      element.addEventListener(key.slice(2).toLowerCase(), /** @type {EventListener} */ (value));
    }
    else element.setAttribute(key, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

/**
 * @param {Node} parent
 * @param {Child[]} children
 */
export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, /** @type {Child[]} */ (child));
    else parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/**
 * Replaces every child of `parent`.
 * @param {Element} parent
 * @param {...Child} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

let counter = 0;

/** A document-unique id for label/aria wiring. */
export function uid(prefix = 'id') {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** @param {string} message */
export function loading(message = 'Loading…') {
  return h('div', { class: 'loading', role: 'status' }, message);
}

/**
 * @param {'error' | 'success' | 'info' | 'warning'} kind
 * @param {Child} body
 * @param {Record<string, unknown>} [props]
 */
export function alertBox(kind, body, props = {}) {
  return h('div', { class: `alert alert--${kind}`, role: kind === 'error' ? 'alert' : 'status', ...props }, h('div', { class: 'alert__body' }, body));
}

/**
 * @param {string} text
 * @param {'success' | 'warning' | 'danger' | 'info' | 'neutral'} tone
 * @param {{ pulse?: boolean, plain?: boolean }} [options]
 */
export function badge(text, tone, options = {}) {
  const classes = ['badge', `badge--${tone}`];
  if (options.pulse) classes.push('badge--pulse');
  if (options.plain) classes.push('badge--plain');
  return h('span', { class: classes.join(' ') }, text);
}

/**
 * A table whose rows turn into labelled cards on narrow screens.
 * @param {string} caption  read by screen readers
 * @param {string[]} headings  the empty string marks the actions column
 * @param {HTMLElement[]} rows
 */
export function table(caption, headings, rows) {
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'table table--stack' },
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', null, h('tr', null, headings.map((heading) => h('th', { scope: 'col' }, heading === '' ? h('span', { class: 'visually-hidden' }, 'Actions') : heading)))),
      h('tbody', null, rows)));
}

/**
 * A cell with the heading shown beside it on narrow screens.
 * @param {string} label
 * @param {...Child} children
 */
export function cell(label, ...children) {
  return h('td', { 'data-label': label }, ...children);
}
