// The endpoint form (create and edit) and the event-type catalog it offers.
import { api } from '../api.js';
import { h, uid } from '../dom.js';
import { field, simpleForm } from '../forms.js';

/** @typedef {{ type: string, description: string }} EventType */
/**
 * @typedef {object} Endpoint
 * @property {string} id
 * @property {string} url
 * @property {string[]} events
 * @property {string} description
 * @property {boolean} enabled
 * @property {'failing' | null} [disabledReason]  'failing' when the service disabled it
 * @property {string | null} [disabledAt]
 * @property {string} createdAt
 * @property {string} updatedAt
 */

/** @type {Promise<EventType[]> | null} */
let catalog = null;

/**
 * GET /api/event-webhooks/event-types, read leniently: a list of {type, description}
 * (or name/id), of strings, or a map of type to description.
 * @returns {Promise<EventType[]>}
 */
export function loadEventTypes() {
  catalog ??= api('GET', '/api/event-webhooks/event-types').then(normalizeCatalog, (error) => {
    catalog = null;
    throw error;
  });
  return catalog;
}

/** @param {any} answer @returns {EventType[]} */
function normalizeCatalog(answer) {
  const list = Array.isArray(answer) ? answer
    : Array.isArray(answer?.data) ? answer.data
    : Array.isArray(answer?.eventTypes) ? answer.eventTypes
    : Array.isArray(answer?.types) ? answer.types
    : null;
  if (list === null) {
    return Object.entries(answer ?? {}).filter(([, value]) => typeof value === 'string').map(([type, description]) => ({ type, description: String(description) }));
  }
  return /** @type {unknown[]} */ (list)
    .map((/** @type {any} */ item) => (typeof item === 'string'
      ? { type: item, description: '' }
      : { type: String(item?.type ?? item?.name ?? item?.id ?? ''), description: String(item?.description ?? '') }))
    .filter((/** @type {EventType} */ item) => item.type !== '' && item.type !== '*');
}

/** "All events" or the list, for tables. @param {string[]} events */
export function describeEvents(events) {
  if (events.includes('*')) return 'All events';
  return events.length === 1 ? events[0] ?? '' : `${events.length} event types`;
}

/**
 * The events picker: all events ("*"), or a chosen subset of the catalog.
 * @param {EventType[]} types
 * @param {string[]} selected
 */
function eventsFieldset(types, selected) {
  const name = uid('events-mode');
  const all = selected.includes('*');
  const allRadio = /** @type {HTMLInputElement} */ (h('input', { type: 'radio', name, value: 'all', checked: all }));
  const someRadio = /** @type {HTMLInputElement} */ (h('input', { type: 'radio', name, value: 'some', checked: !all }));
  const boxes = types.map((type) => /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox', name: 'events', value: type.type, checked: !all && selected.includes(type.type) })));
  const grid = h('div', { class: 'choices choices--grid', role: 'group', 'aria-label': 'Event types', hidden: all },
    types.map((type, index) => h('label', { class: 'choice' },
      boxes[index],
      h('span', { class: 'choice__text' },
        h('span', { class: 'choice__title mono' }, type.type),
        type.description ? h('span', { class: 'choice__hint' }, type.description) : null))));

  const validate = () => {
    const first = boxes[0];
    if (!first) return;
    const missing = someRadio.checked && !boxes.some((box) => box.checked);
    first.setCustomValidity(missing ? 'Select at least one event type, or choose all events.' : '');
  };
  const sync = () => {
    grid.hidden = !someRadio.checked;
    validate();
  };
  allRadio.addEventListener('change', sync);
  someRadio.addEventListener('change', sync);
  for (const box of boxes) box.addEventListener('change', validate);
  validate();

  const fieldset = h('fieldset', { 'data-field': 'events' },
    h('legend', null, 'Events to send'),
    h('div', { class: 'choices' },
      h('label', { class: 'choice' }, allRadio, h('span', { class: 'choice__text' }, h('span', { class: 'choice__title' }, 'All events'), h('span', { class: 'choice__hint' }, 'Every event type, including types added later.'))),
      h('label', { class: 'choice' }, someRadio, h('span', { class: 'choice__text' }, h('span', { class: 'choice__title' }, 'Selected events'), h('span', { class: 'choice__hint' }, 'Only the types you choose below.')))),
    grid);
  /** @returns {string[]} */
  const value = () => (allRadio.checked ? ['*'] : boxes.filter((box) => box.checked).map((box) => box.value));
  return { fieldset, value };
}

/**
 * @param {{ types: EventType[], endpoint?: Endpoint, submitLabel: string, onCancel: () => void,
 *   onSubmit: (input: { url: string, events: string[], description: string }) => Promise<void> }} options
 */
export function endpointForm({ types, endpoint, submitLabel, onCancel, onSubmit }) {
  const url = field({
    label: 'Endpoint URL', name: 'url', type: 'url', required: true, maxlength: 2048, value: endpoint?.url,
    placeholder: 'https://example.com/webhooks/machine-platform', hint: 'HTTPS only. Each event arrives as a signed JSON POST.',
  });
  url.input.setAttribute('data-autofocus', '');
  const checkScheme = () => url.input.setCustomValidity(url.input.value.trim() === '' || /^https:\/\//i.test(url.input.value.trim()) ? '' : 'Use an https:// address.');
  url.input.addEventListener('input', checkScheme);
  checkScheme();
  const description = field({
    label: 'Description', name: 'description', optional: true, maxlength: 500, value: endpoint?.description,
    placeholder: 'e.g. Production event consumer',
  });
  const events = eventsFieldset(types, endpoint?.events ?? ['*']);
  return simpleForm({
    label: submitLabel,
    fields: [url.wrapper, description.wrapper, events.fieldset],
    submitLabel,
    secondary: h('button', { type: 'button', class: 'btn', onclick: onCancel }, 'Cancel'),
    onSubmit: () => onSubmit({ url: url.input.value.trim(), events: events.value(), description: description.input.value.trim() }),
  }).form;
}
