// Short confirmations ("API key revoked"), announced politely to screen readers.
import { h } from './dom.js';

const VISIBLE_MS = 5000;

/** @type {HTMLElement | null} */
let region = null;

function toastRegion() {
  if (region === null || !region.isConnected) {
    region = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(region);
  }
  return region;
}

/**
 * @param {string} message
 * @param {'info' | 'error'} [kind]
 */
export function toast(message, kind = 'info') {
  const item = h('div', { class: `toast toast--${kind}` }, message);
  toastRegion().append(item);
  setTimeout(() => item.remove(), VISIBLE_MS);
}
