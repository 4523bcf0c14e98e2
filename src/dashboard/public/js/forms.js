// Labelled fields and the submit cycle every form shares: busy button, no
// double submits, and the API's problem `detail` shown at the field it names
// (or above the form when it names none).
import { fieldOf, messageOf } from './api.js';
import { alertBox, h, replace, uid } from './dom.js';

/** @typedef {import('./dom.js').Child} Child */

/**
 * @typedef {object} FieldOptions
 * @property {string} label
 * @property {string} name
 * @property {string} [type]
 * @property {string} [autocomplete]
 * @property {boolean} [required]
 * @property {string} [hint]
 * @property {number} [minlength]
 * @property {number} [maxlength]
 * @property {string} [value]
 * @property {string} [placeholder]
 * @property {string} [inputmode]
 * @property {boolean} [multiline]
 * @property {boolean} [optional]  says "(optional)" beside the label
 * @property {boolean} [mono]
 * @property {Child} [aside]  a link beside the label, e.g. "Forgot password?"
 */

/**
 * @param {FieldOptions} options
 * @returns {{ wrapper: HTMLElement, input: HTMLInputElement }}
 */
export function field(options) {
  const id = uid(`field-${options.name}`);
  const hintId = options.hint ? `${id}-hint` : undefined;
  const attributes = {
    id,
    name: options.name,
    class: `${options.multiline ? 'textarea' : 'input'}${options.mono ? ' input--mono' : ''}`,
    autocomplete: options.autocomplete,
    required: options.required,
    minlength: options.minlength,
    maxlength: options.maxlength,
    placeholder: options.placeholder,
    inputmode: options.inputmode,
    'aria-describedby': hintId,
    spellcheck: options.type === 'email' || options.type === 'url' || options.mono ? 'false' : undefined,
  };
  const input = options.multiline
    ? h('textarea', attributes, options.value ?? '')
    : h('input', { ...attributes, type: options.type ?? 'text', value: options.value });
  const label = h('label', { for: id }, options.label, options.optional ? h('span', { class: 'field__optional' }, ' (optional)') : null);
  const wrapper = h('div', { class: 'field' },
    options.aside ? h('div', { class: 'field__label-row' }, label, options.aside) : label,
    input,
    options.hint ? h('div', { class: 'field__hint', id: hintId }, options.hint) : null);
  return { wrapper, input: /** @type {HTMLInputElement} */ (input) };
}

/**
 * Wires a form: native validation first, then `onSubmit`; its error is shown in `errorSlot`.
 * @param {HTMLFormElement} form
 * @param {HTMLButtonElement} button
 * @param {HTMLElement} errorSlot
 * @param {() => Promise<void>} onSubmit
 */
export function handleSubmit(form, button, errorSlot, onSubmit) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (button.getAttribute('aria-busy') === 'true') return;
    replace(errorSlot);
    clearFieldErrors(form);
    button.setAttribute('aria-busy', 'true');
    button.disabled = true;
    try {
      await onSubmit();
    } catch (error) {
      if (!showAtField(form, error)) replace(errorSlot, alertBox('error', messageOf(error)));
    } finally {
      button.removeAttribute('aria-busy');
      button.disabled = false;
    }
  });
  // Editing a field that was refused takes its message away.
  form.addEventListener('input', (event) => {
    const control = event.target instanceof Element ? event.target.closest('[aria-invalid="true"]') : null;
    if (control) clearFieldErrors(form);
  });
}

/**
 * Shows an API error at the field its detail names: the message below the
 * field, `aria-invalid`, the message in the field's description, focus on it.
 * A group of choices (`data-field` on its fieldset) counts as one field.
 * @param {HTMLFormElement} form
 * @param {unknown} error
 * @returns {boolean} false when the detail names no field of this form
 */
function showAtField(form, error) {
  const name = fieldOf(error);
  if (name === null) return false;
  const group = form.querySelector(`[data-field="${CSS.escape(name)}"]`);
  const controls = /** @type {HTMLElement[]} */ ([...(group ?? form).querySelectorAll(group ? 'input, select, textarea' : `[name="${CSS.escape(name)}"]`)]);
  const first = controls[0];
  if (first === undefined) return false;
  const message = h('p', { class: 'field__error', id: uid('field-error'), 'data-field-error': '' }, messageOf(error));
  (group ?? first.closest('.field') ?? first.parentElement ?? form).append(message);
  for (const control of controls) {
    control.setAttribute('aria-invalid', 'true');
    control.setAttribute('aria-describedby', [control.getAttribute('aria-describedby'), message.id].filter(Boolean).join(' '));
  }
  (controls.find((control) => control.getClientRects().length > 0) ?? first).focus();
  return true;
}

/** @param {HTMLFormElement} form */
function clearFieldErrors(form) {
  const messages = [...form.querySelectorAll('[data-field-error]')];
  const ids = new Set(messages.map((message) => message.id));
  for (const control of form.querySelectorAll('[aria-invalid="true"]')) {
    const rest = (control.getAttribute('aria-describedby') ?? '').split(' ').filter((id) => id !== '' && !ids.has(id));
    if (rest.length > 0) control.setAttribute('aria-describedby', rest.join(' '));
    else control.removeAttribute('aria-describedby');
    control.removeAttribute('aria-invalid');
  }
  for (const message of messages) message.remove();
}

/**
 * A form with its fields, an error slot and a submit button.
 * @param {{ fields: Child[], submitLabel: string, onSubmit: () => Promise<void>, secondary?: Child, block?: boolean, label?: string }} options
 */
export function simpleForm({ fields, submitLabel, onSubmit, secondary, block = false, label }) {
  const errorSlot = h('div');
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: `btn btn--primary${block ? ' btn--block' : ''}` }, submitLabel));
  const form = /** @type {HTMLFormElement} */ (h('form', { class: 'form', 'aria-label': label },
    errorSlot,
    fields,
    block ? button : h('div', { class: 'actions' }, button, secondary ?? null)));
  handleSubmit(form, button, errorSlot, onSubmit);
  return { form, button, errorSlot };
}

/** A "confirm password" input that must match `password`. @param {HTMLInputElement} password @param {HTMLInputElement} confirmation */
export function mustMatch(password, confirmation) {
  const check = () => confirmation.setCustomValidity(confirmation.value === password.value ? '' : 'The two passwords do not match.');
  password.addEventListener('input', check);
  confirmation.addEventListener('input', check);
}
