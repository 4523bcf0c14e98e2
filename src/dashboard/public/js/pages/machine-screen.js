// A machine's screen: on its page, a picture read again every
// few seconds while the section is in view and the machine runs, its size, and
// a live-view link opened in a new tab; in a run's details, the screen as the
// run ended. Pictures are <img> elements loaded from the API with the session
// cookie (same origin, so the CSP's img-src 'self' covers them); one that does
// not load is asked about once more with fetch, which reads why (no display,
// not running). "Take control" swaps the picture for the live screen that
// takes this page's mouse and keyboard (noVNC over the owner's control
// WebSocket); a live-view link never can.
import { ApiError, api, apiRaw, messageOf } from '../api.js';
import { alertBox, h, loading, replace } from '../dom.js';
import { card } from '../layout.js';
import { poll } from '../poll.js';
import { toast } from '../toast.js';
import { openLiveView } from './machine-dialogs.js';

/** @typedef {import('./machines.js').Machine} Machine */

/** noVNC's client, as the live view serves it (the @novnc/novnc package, as it is on npm). */
const NOVNC = '/live/assets/novnc/core/rfb.js';

/** How often the picture is read again while it is looked at (the live view's fallback uses the same). */
const REFRESH_MS = 3000;
/** A run's picture is taken in the background as it ends: a run this recent is asked again, this often, this many times. */
const RUN_SHOT_RECENT_MS = 30_000;
const RUN_SHOT_RETRY_MS = 2000;
const RUN_SHOT_TRIES = 5;

/** @type {Record<string, string>} A status other than running, in words. */
const STATES = { starting: 'starting', stopping: 'stopping', stopped: 'stopped', error: 'in error', destroyed: 'destroyed' };

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

/**
 * Loads a picture; resolves once it can be drawn.
 * @param {string} src
 * @param {string} alt
 * @returns {Promise<HTMLImageElement>}
 * @throws {Error} when the answer is not a picture (an error status, a network failure)
 */
async function loadPicture(src, alt) {
  const picture = /** @type {HTMLImageElement} */ (h('img', { class: 'screen__picture', alt, src }));
  await picture.decode();
  return picture;
}

/** "1280 × 800 pixels" @param {HTMLImageElement} picture */
const sizeOf = (picture) => `${picture.naturalWidth} × ${picture.naturalHeight} pixels`;

/**
 * @typedef {object} ScreenCard  the section's parts, and what its body shows
 * @property {HTMLElement} element
 * @property {HTMLElement} body
 * @property {HTMLButtonElement} refreshButton
 * @property {HTMLButtonElement} liveButton
 * @property {HTMLButtonElement} controlButton
 * @property {boolean} showing  whether the last read showed a picture: problems are not read again on their own
 */

/**
 * The Screen section of a machine's page. It reads pictures only while the
 * machine runs, the section is on screen and the tab is shown; leaving the
 * page stops it.
 * @param {Machine} machine
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function screenSection(machine, onCleanup) {
  const path = `/api/machines/${encodeURIComponent(machine.id)}/screenshot`;
  const screen = screenCard(machine);
  let status = '';
  let inView = false;
  /** Counts reads: only the newest one draws. */
  let reads = 0;
  const pictures = poll(onCleanup, readPicture, REFRESH_MS);
  screen.refreshButton.addEventListener('click', () => pictures.refresh());
  /** @type {{ disconnect: () => void } | null} noVNC's session while this page controls the screen */
  let control = null;
  screen.controlButton.addEventListener('click', () => (control || screen.controlButton.dataset.connecting ? stopControl(true) : void startControl()));
  onCleanup(() => stopControl(false));

  /** Shows the live screen and hands it this page's mouse and keyboard. */
  async function startControl() {
    pictures.pause();
    reads += 1;
    screen.controlButton.dataset.connecting = 'yes';
    screen.controlButton.textContent = 'Stop control';
    screen.refreshButton.hidden = true;
    const { default: RFB } = await import(NOVNC);
    if (status !== 'running' || !screen.controlButton.dataset.connecting) return;
    const target = h('div', { class: 'screen__control', role: 'application', 'aria-label': `The screen of ${machine.name}, under your control`, dataset: { screenControl: 'connecting' } });
    replace(screen.body, target);
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const rfb = new RFB(target, `${scheme}://${location.host}/api/machines/${encodeURIComponent(machine.id)}/screen/control`, { shared: true });
    rfb.viewOnly = false;
    rfb.scaleViewport = true;
    rfb.focusOnClick = true;
    const session = { disconnect: () => rfb.disconnect() };
    control = session;
    delete screen.controlButton.dataset.connecting;
    rfb.addEventListener('connect', () => {
      target.dataset.screenControl = 'live';
      rfb.focus();
    });
    rfb.addEventListener('disconnect', () => {
      if (control !== session) return;
      stopControl(true);
      toast('Control of the screen ended.', 'info');
    });
  }

  /** Back to watching: pictures again, when `watch` and the machine runs. @param {boolean} watch */
  function stopControl(watch) {
    const session = control;
    control = null;
    delete screen.controlButton.dataset.connecting;
    screen.controlButton.textContent = 'Take control';
    session?.disconnect();
    if (!watch || status !== 'running') return;
    screen.refreshButton.hidden = false;
    screen.showing = false;
    replace(screen.body, loading('Loading the screen…'));
    pictures.refresh();
  }

  const observer = new IntersectionObserver((entries) => {
    const was = inView;
    inView = entries.some((entry) => entry.isIntersecting);
    if (inView && !was && screen.showing) pictures.refresh();
    if (!inView) pictures.pause();
  });
  observer.observe(screen.element);
  const onVisibility = () => {
    if (document.hidden) pictures.pause();
    else if (screen.showing) pictures.refresh();
  };
  document.addEventListener('visibilitychange', onVisibility);
  onCleanup(() => {
    observer.disconnect();
    document.removeEventListener('visibilitychange', onVisibility);
  });

  /** @returns {Promise<boolean>} whether to read it again: a picture is shown and looked at */
  async function readPicture() {
    if (status !== 'running' || control !== null || screen.controlButton.dataset.connecting) return false;
    const read = ++reads;
    try {
      // A new address each time: the picture is never one the browser kept.
      const picture = await loadPicture(`${path}?${new URLSearchParams({ at: String(Date.now()) })}`, `The screen of ${machine.name}`);
      if (!pictures.stillShown() || read !== reads) return false;
      showPicture(screen, picture);
    } catch {
      const problem = await whyNoPicture(path);
      if (!pictures.stillShown() || read !== reads) return false;
      if (problem === null) {
        // It loads now (a moment's failure): try again at the next turn, keeping what is shown.
        if (!screen.showing) replace(screen.body, alertBox('error', 'The screen could not be shown. It is tried again in a moment.'));
        screen.showing = true;
      } else {
        showProblem(screen, problem);
      }
    }
    return screen.showing && status === 'running' && inView && !document.hidden;
  }

  /** The machine's status changed (or is first known): show its screen, or why there is none. @param {string} next */
  function setStatus(next) {
    if (next === status) return;
    status = next;
    if (status === 'running') {
      screen.refreshButton.hidden = false;
      screen.showing = false;
      replace(screen.body, loading('Loading the screen…'));
      pictures.refresh();
      return;
    }
    stopControl(false);
    pictures.pause();
    reads += 1;
    screen.showing = false;
    drawNotRunning(screen, STATES[status] ?? 'not running');
  }

  return { element: screen.element, setStatus };
}

/**
 * The card with its Refresh and "Open live view" buttons; the body shows a loading line.
 * @param {Machine} machine
 * @returns {ScreenCard}
 */
function screenCard(machine) {
  const refreshButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Refresh'));
  const liveButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Open live view'));
  liveButton.addEventListener('click', () => openLive(machine, liveButton));
  const controlButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Take control'));
  const body = h('div', { class: 'card__body' }, loading('Loading the screen…'));
  const element = card({
    title: 'Screen',
    id: 'screen',
    flush: true,
    description: 'What the machine’s display shows, read again every few seconds while you look at it.',
    actions: [refreshButton, controlButton, liveButton],
  }, body);
  return { element, body, refreshButton, liveButton, controlButton, showing: false };
}

/** The API's reason for refusing the picture; null when it answers one now. @param {string} path */
async function whyNoPicture(path) {
  try {
    const response = await apiRaw('GET', path);
    await response.body?.cancel();
    return null;
  } catch (error) {
    return error;
  }
}

/** @param {ScreenCard} screen @param {HTMLImageElement} picture */
function showPicture(screen, picture) {
  screen.showing = true;
  screen.liveButton.hidden = false;
  screen.controlButton.hidden = false;
  replace(screen.body, h('figure', { class: 'screen', dataset: { screen: 'shown' } },
    picture,
    h('figcaption', { class: 'screen__caption' }, h('span', { dataset: { screenSize: '' } }, sizeOf(picture)), ` · read at ${clock.format(new Date())}`)));
}

/** @param {ScreenCard} screen @param {unknown} error */
function showProblem(screen, error) {
  screen.showing = false;
  if (error instanceof ApiError && error.code === 'no_display') {
    screen.liveButton.hidden = true;
    screen.controlButton.hidden = true;
    replace(screen.body, h('div', { class: 'empty', dataset: { unavailable: 'no_display' } },
      h('h3', null, 'No display'),
      h('p', null, 'This machine has no display, so there is no screen to show: its image has none, or its display was stopped.')));
    return;
  }
  if (error instanceof ApiError && error.code === 'invalid_state') {
    // The machine stopped without this page noticing: say so as for any status but running.
    drawNotRunning(screen, 'not running now');
    return;
  }
  replace(screen.body, alertBox('error', messageOf(error)));
}

/** @param {ScreenCard} screen @param {string} what  the machine's state, in words ("stopped") */
function drawNotRunning(screen, what) {
  screen.refreshButton.hidden = what !== 'not running now';
  screen.liveButton.hidden = true;
  screen.controlButton.hidden = true;
  replace(screen.body, h('div', { class: 'empty', dataset: { unavailable: 'invalid_state' } },
    h('h3', null, `The machine is ${what}.`),
    h('p', null, what === 'destroyed' ? 'Its screen went with it.' : 'Its screen shows here while it runs.')));
}

/** Opens the live view in a new tab; a browser that blocks the tab gets the link to click. @param {Machine} machine @param {HTMLButtonElement} button */
async function openLive(machine, button) {
  button.disabled = true;
  try {
    /** @type {{ url: string, expiresAt: string }} */
    const link = await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/live-view`);
    const url = new URL(link.url, location.origin);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('The live-view link is not a web address.');
    // The dashboard's Cross-Origin-Opener-Policy keeps the new tab from reaching back to this page.
    const tab = window.open(url.toString(), '_blank');
    // A browser that blocked the tab: the same link, to open with a click.
    if (tab === null) openLiveView(machine, link);
  } catch (error) {
    toast(error instanceof ApiError ? messageOf(error) : 'The live-view link could not be opened.', 'error');
  } finally {
    button.disabled = false;
  }
}

/**
 * The screen as a run ended, where the machine kept one: an element that
 * holds its picture once it has loaded, and stays empty when there is none
 * (no display, a provider without pictures, or kept past two hours).
 * @param {{ id: string, finishedAt: string | null }} run
 * @param {() => boolean} stillShown  false once the run's details are closed
 */
export function runScreenshot(run, stillShown) {
  const holder = h('div', { dataset: { runScreenshot: '' } });
  const src = `/api/runs/${encodeURIComponent(run.id)}/screenshot`;
  const recent = run.finishedAt !== null && Date.now() - new Date(run.finishedAt).getTime() < RUN_SHOT_RECENT_MS;

  /** @param {number} tries */
  async function load(tries) {
    try {
      const picture = await loadPicture(src, `The screen as run ${run.id} ended`);
      if (!stillShown()) return;
      replace(holder, h('figure', { class: 'screen screen--run' },
        h('figcaption', { class: 'field__label' }, 'Screen as the run ended'),
        picture,
        h('span', { class: 'screen__caption', dataset: { screenSize: '' } }, sizeOf(picture))));
    } catch {
      if (recent && tries > 1 && stillShown()) setTimeout(() => load(tries - 1), RUN_SHOT_RETRY_MS);
    }
  }

  load(recent ? RUN_SHOT_TRIES : 1);
  return holder;
}
