// Modal dialogs on the native <dialog>: the page behind is inert, Tab cycles
// inside, Escape closes, and focus returns to what opened it.
import { messageOf } from './api.js';
import { alertBox, h, replace, uid } from './dom.js';

/** @typedef {import('./dom.js').Child} Child */

/**
 * @typedef {object} DialogHandle
 * @property {HTMLDialogElement} element
 * @property {HTMLElement} body
 * @property {(...content: Child[]) => void} setContent  replaces the body and focuses its first control
 * @property {() => void} close
 */

/** @type {Set<DialogHandle>} */
const openDialogs = new Set();

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * `size`: `wide` for forms, `widest` for tables (an attempt log). `initialFocus`:
 * `close` opens a dialog that only shows something on its close button, so it
 * opens at its top rather than scrolled to its first control.
 * @param {{ title: string, content: Child[], wide?: boolean, size?: 'normal' | 'wide' | 'widest', initialFocus?: 'content' | 'close', onClose?: () => void }} options
 * @returns {DialogHandle}
 */
export function openDialog({ title, content, wide = false, size = wide ? 'wide' : 'normal', initialFocus = 'content', onClose }) {
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  const titleId = uid('dialog-title');
  const body = h('div', { class: 'dialog__body' });
  const closeButton = h('button', { type: 'button', class: 'btn btn--ghost btn--icon', 'aria-label': 'Close', onclick: () => handle.close() }, '×');
  const element = /** @type {HTMLDialogElement} */ (h('dialog', { class: size === 'normal' ? 'dialog' : `dialog dialog--${size}`, 'aria-labelledby': titleId },
    h('div', { class: 'dialog__header' }, h('h2', { id: titleId }, title), closeButton),
    body));

  let closed = false;
  /** @type {DialogHandle} */
  const handle = {
    element,
    body,
    setContent(...children) {
      replace(body, ...children);
      focusFirst(body, element);
    },
    close() {
      if (closed) return;
      closed = true;
      openDialogs.delete(handle);
      if (element.open) element.close();
      // Removed, not hidden: a secret shown in a dialog leaves the DOM with it.
      element.remove();
      onClose?.();
      if (opener?.isConnected) opener.focus();
    },
  };

  element.addEventListener('cancel', (event) => {
    event.preventDefault();
    handle.close();
  });
  element.addEventListener('close', () => handle.close());
  element.addEventListener('keydown', (event) => trapTab(event, element));

  replace(body, ...content);
  document.body.append(element);
  openDialogs.add(handle);
  element.showModal();
  if (initialFocus === 'close') closeButton.focus();
  else focusFirst(body, element);
  return handle;
}

/** Closes every dialog (on navigation: nothing a dialog showed survives a page change). */
export function closeAllDialogs() {
  for (const handle of [...openDialogs]) handle.close();
}

/**
 * Asks before doing something that cannot be undone; runs `action` inside the
 * dialog so its error is shown there. Resolves true once `action` succeeded.
 * `acknowledge`: a checkbox that must be ticked first, for what goes further
 * than its button says (a folder deleted with everything in it).
 * @param {{ title: string, message: Child, confirmLabel: string, danger?: boolean, acknowledge?: string, action: () => Promise<void> }} options
 * @returns {Promise<boolean>}
 */
export function confirmAction({ title, message, confirmLabel, danger = false, acknowledge, action }) {
  return new Promise((resolve) => {
    let succeeded = false;
    const error = h('div');
    const checkId = uid('acknowledge');
    const check = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox', id: checkId }));
    check.addEventListener('change', () => replace(error));
    const confirm = h('button', { type: 'submit', class: danger ? 'btn btn--danger' : 'btn btn--primary' }, confirmLabel);
    const cancel = h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel');
    const form = h('form', { class: 'form', novalidate: true },
      typeof message === 'string' ? h('p', null, message) : message,
      acknowledge ? h('label', { class: 'choice', for: checkId }, check, h('span', { class: 'choice__title' }, acknowledge)) : null,
      error,
      h('div', { class: 'dialog__footer' }, cancel, confirm));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (confirm.getAttribute('aria-busy') === 'true') return;
      if (acknowledge && !check.checked) {
        replace(error, alertBox('error', 'Tick the box above to confirm.'));
        check.focus();
        return;
      }
      confirm.setAttribute('aria-busy', 'true');
      confirm.setAttribute('disabled', '');
      replace(error);
      try {
        await action();
        succeeded = true;
        dialog.close();
      } catch (caught) {
        replace(error, alertBox('error', messageOf(caught)));
      } finally {
        confirm.removeAttribute('aria-busy');
        confirm.removeAttribute('disabled');
      }
    });
    const dialog = openDialog({ title, content: [form], onClose: () => resolve(succeeded) });
    // Safe default for destructive actions: focus starts on Cancel.
    if (danger) cancel.focus();
  });
}

/** @param {HTMLElement} body @param {HTMLDialogElement} dialog */
function focusFirst(body, dialog) {
  const target = body.querySelector('[data-autofocus]') ?? body.querySelector(FOCUSABLE);
  if (target instanceof HTMLElement) target.focus();
  else dialog.focus();
}

/** @param {KeyboardEvent} event @param {HTMLDialogElement} dialog */
function trapTab(event, dialog) {
  if (event.key !== 'Tab') return;
  const focusable = [...dialog.querySelectorAll(FOCUSABLE)].filter((node) => node instanceof HTMLElement && node.getClientRects().length > 0);
  const first = /** @type {HTMLElement | undefined} */ (focusable[0]);
  const last = /** @type {HTMLElement | undefined} */ (focusable[focusable.length - 1]);
  if (!first || !last) return;
  if (event.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first.focus();
  }
}
