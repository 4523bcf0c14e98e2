// A secret (API key, signing secret, machine token) is shown once: in the
// dialog that received it, and nowhere else. Nothing stores it; closing the
// dialog, changing page or leaving the page removes it from the DOM.
import { closeAllDialogs } from './dialog.js';
import { h, uid } from './dom.js';

/**
 * @param {{ label: string, value: string, note?: string }} options
 */
export function secretField({ label, value, note }) {
  const id = uid('secret');
  const input = /** @type {HTMLInputElement} */ (h('input', {
    id, class: 'input input--mono', type: 'text', readonly: true, value,
    autocomplete: 'off', spellcheck: 'false', 'data-secret': '', 'data-autofocus': '',
  }));
  input.addEventListener('focus', () => input.select());
  return h('div', { class: 'secret' },
    h('div', { class: 'alert alert--warning', role: 'status' },
      h('div', { class: 'alert__body' },
        h('strong', null, 'Copy it now: it will not be shown again.'),
        note ?? 'Store it somewhere safe, like a password manager or your secrets store.')),
    h('div', { class: 'field' },
      h('label', { for: id }, label),
      h('div', { class: 'secret__row' }, input, copyButton(() => input.value, midSentence(label)))));
}

/**
 * A label as it reads inside a sentence: "Signing secret" becomes "signing
 * secret"; "API key" and "MCP token" keep their capitals.
 * @param {string} label
 */
function midSentence(label) {
  return /^\p{Lu}\p{Ll}/u.test(label) ? label.charAt(0).toLowerCase() + label.slice(1) : label;
}

/**
 * @param {() => string} read  the text to copy, read at click time
 * @param {string} what  as it reads mid-sentence, for the accessible name: "Copy API key", "Copy signing secret"
 * @param {{ small?: boolean }} [options]
 */
export function copyButton(read, what, options = {}) {
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: options.small ? 'btn btn--small' : 'btn', 'aria-label': `Copy ${what}` }, 'Copy'));
  const status = h('span', { class: 'visually-hidden', role: 'status' });
  button.addEventListener('click', async () => {
    const copied = await copyText(read());
    button.textContent = copied ? 'Copied' : 'Copy failed';
    status.textContent = copied ? `${what.charAt(0).toUpperCase()}${what.slice(1)} copied to the clipboard.` : 'Copying failed: select the text and copy it by hand.';
    setTimeout(() => {
      button.textContent = 'Copy';
    }, 2000);
  });
  return h('span', { class: 'actions' }, button, status);
}

/** @param {string} text */
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

// Leaving the page (including into the back-forward cache) takes shown secrets with it.
window.addEventListener('pagehide', () => {
  closeAllDialogs();
  for (const node of document.querySelectorAll('[data-secret]')) {
    if (node instanceof HTMLInputElement) node.value = '';
    node.remove();
  }
});
