// Moving between pages without reloading, and the one-shot message the next page shows.

/** @typedef {{ kind: 'success' | 'info' | 'warning' | 'error', text: string }} Flash */

/** @type {(() => Promise<void>) | null} */
let renderPage = null;
/** @type {Flash | null} */
let flash = null;

/** Called once by the router. @param {() => Promise<void>} render */
export function onNavigate(render) {
  renderPage = render;
}

/**
 * @param {string} to  a path on this origin, with its query
 * @param {{ replace?: boolean }} [options]
 */
export async function navigate(to, options = {}) {
  if (options.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  await renderPage?.();
}

/** A message for the next page to show once ("You are signed out."). @param {Flash} message */
export function setFlash(message) {
  flash = message;
}

export function takeFlash() {
  const message = flash;
  flash = null;
  return message;
}

/**
 * Where to go after signing in: a same-origin path from `?next=`, never another site.
 * @param {URLSearchParams} query
 */
export function nextPath(query) {
  const next = query.get('next');
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}
