// The live-view page's script: the machine's screen as it changes, over a
// WebSocket that the link's token opens (noVNC, view-only), or, where the
// machine has no stream, its picture refreshed every few seconds. When the
// stream ends it says why: the link expired, was revoked, or the machine stopped.

/** noVNC's client, served beside this script (the @novnc/novnc package, as it is on npm). */
const NOVNC = './novnc/core/rfb.js';

/** @param {string} selector */
const element = (selector) => /** @type {HTMLElement} */ (document.querySelector(selector));
const main = element('main');
const screen = element('#screen');
const picture = /** @type {HTMLImageElement} */ (element('#picture'));
const state = element('#state');
const token = location.pathname.split('/')[2];
const REFRESH_MS = 3000;
/** @type {ReturnType<typeof setInterval> | undefined} */
let refresh;

/**
 * @param {string} text
 * @param {boolean} ended
 */
function say(text, ended) {
  state.textContent = text;
  main.dataset.state = ended ? 'ended' : 'live';
}

function showPictures() {
  screen.hidden = true;
  picture.hidden = false;
  const next = () => {
    const fresh = new Image();
    fresh.onload = () => (picture.src = fresh.src);
    fresh.onerror = () => void whyItEnded();
    fresh.src = `/live/${token}/screen?at=${Date.now()}`;
  };
  refresh = setInterval(next, REFRESH_MS);
  say('Showing a picture of the screen every few seconds.', false);
}

async function whyItEnded() {
  clearInterval(refresh);
  const answer = await fetch(`/live/${token}/status`, { cache: 'no-store' }).catch(() => null);
  if (answer?.ok) {
    const status = await answer.json();
    if (status.machine !== 'running') return say(`This live view has ended: the machine is ${status.machine}.`, true);
    return showPictures();
  }
  const expiresAt = Date.parse(main.dataset.expiresAt ?? '');
  say(Date.now() >= expiresAt ? 'This live view has ended: the link expired.' : 'This live view has ended: the link was revoked.', true);
  picture.hidden = true;
  screen.hidden = true;
}

if (main.dataset.stream === 'yes') {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const { default: RFB } = await import(NOVNC);
  const rfb = new RFB(screen, `${scheme}://${location.host}/live/${token}/stream`, { shared: true });
  rfb.viewOnly = true;
  rfb.scaleViewport = true;
  rfb.focusOnClick = false;
  rfb.addEventListener('connect', () => {
    picture.hidden = true;
    screen.hidden = false;
    say('Live.', false);
  });
  rfb.addEventListener('disconnect', () => void whyItEnded());
} else {
  showPictures();
}
