// A machine's terminal: a shell in the machine, drawn by
// xterm.js, over the service's WebSocket. Binary frames carry the PTY's bytes
// both ways; text frames are JSON: the page's size to the service, the
// terminal's id from it. The id is kept in the page's address (?terminal=),
// so a reload of this tab (within the terminal's 30 s grace) attaches to the
// same shell and is sent what it printed meanwhile. Copy: select, then Ctrl+Shift+C (or the browser's
// own copy); paste: Ctrl+V, Ctrl+Shift+V or the browser's menu.
import { alertBox, h, replace } from '../dom.js';
import { card } from '../layout.js';

/** @typedef {import('./machines.js').Machine} Machine */

const XTERM = '/assets/vendor/xterm/xterm.mjs';
const FIT = '/assets/vendor/xterm/addon-fit.mjs';
const STYLESHEET = '/assets/vendor/xterm/xterm.css';

/** The service's close codes (src/machine-access/terminals.service.ts). */
const ENDED = 4001;
const TAKEN = 4002;

/** @type {Record<string, string>} */
const STATES = { starting: 'starting', stopping: 'stopping', stopped: 'stopped', error: 'in error', destroyed: 'destroyed' };

const encoder = new TextEncoder();

/** The terminal this tab had open before a reload, from its address. */
const terminalInAddress = () => new URLSearchParams(location.search).get('terminal');

/** Keeps the terminal's id in the address (or drops it), without a new history entry. @param {string | null} id */
function keepInAddress(id) {
  const url = new URL(location.href);
  if (id === null) url.searchParams.delete('terminal');
  else url.searchParams.set('terminal', id);
  history.replaceState(history.state, '', url);
}

function loadStylesheet() {
  if (document.querySelector(`link[href="${STYLESHEET}"]`)) return;
  document.head.append(h('link', { rel: 'stylesheet', href: STYLESHEET }));
}

/**
 * The Terminal section of a machine's page: opened with a button (or at once,
 * when this tab had one open before a reload), closed when the page is left
 * (the shell then lives on for its grace period).
 * @param {Machine} machine
 * @param {(cleanup: () => void) => void} onCleanup
 */
export function terminalSection(machine, onCleanup) {
  const openButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Open terminal'));
  const body = h('div', { class: 'card__body' });
  const element = card({
    title: 'Terminal',
    id: 'terminal',
    description: 'A shell in the machine. Closing the page ends its programs after 30 seconds, except those started with nohup or setsid.',
    actions: [openButton],
  }, body);
  let status = '';
  /** @type {{ close: () => void } | null} */
  let session = null;
  let left = false;

  openButton.addEventListener('click', () => void open());
  onCleanup(() => {
    left = true;
    session?.close();
  });

  async function open() {
    session?.close();
    openButton.hidden = true;
    const [{ Terminal }, { FitAddon }] = await Promise.all([import(XTERM), import(FIT)]);
    if (left || status !== 'running') return;
    loadStylesheet();
    const holder = h('div', { class: 'terminal', role: 'group', 'aria-label': `Terminal of ${machine.name}`, dataset: { terminal: 'connecting' } });
    replace(body, holder);
    const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace' });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(holder);
    fit.fit();
    // Ctrl+Shift+C copies the selection (Ctrl+C stays the shell's interrupt); Ctrl+Shift+V is left to the browser, which pastes.
    term.attachCustomKeyEventHandler((/** @type {KeyboardEvent} */ event) => {
      if (!event.ctrlKey || !event.shiftKey || (event.code !== 'KeyC' && event.code !== 'KeyV')) return true;
      if (event.code === 'KeyC' && event.type === 'keydown') {
        event.preventDefault();
        if (term.hasSelection()) void navigator.clipboard?.writeText(term.getSelection()).catch(() => {});
      }
      return false;
    });
    const showSize = () => Object.assign(holder.dataset, { cols: String(term.cols), rows: String(term.rows) });
    showSize();

    /** @type {WebSocket | null} */
    let socket = null;
    const resizes = new ResizeObserver(() => fit.fit());
    resizes.observe(holder);
    term.onData((/** @type {string} */ data) => socket?.readyState === WebSocket.OPEN && socket.send(encoder.encode(data)));
    term.onBinary((/** @type {string} */ data) => socket?.readyState === WebSocket.OPEN && socket.send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    term.onResize((/** @type {{ cols: number, rows: number }} */ size) => {
      showSize();
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'resize', cols: size.cols, rows: size.rows }));
    });

    /** @param {string | null} attachTo  the id of this tab's terminal, if it had one */
    const connect = (attachTo) => {
      const query = new URLSearchParams({ cols: String(term.cols), rows: String(term.rows), ...(attachTo ? { terminal: attachTo } : {}) });
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
      const opened = new WebSocket(`${scheme}://${location.host}/api/machines/${encodeURIComponent(machine.id)}/terminal?${query}`);
      opened.binaryType = 'arraybuffer';
      socket = opened;
      let attached = false;
      opened.addEventListener('open', () => {
        attached = true;
        holder.dataset.terminal = 'open';
        term.focus();
      });
      opened.addEventListener('message', (event) => {
        if (typeof event.data !== 'string') return term.write(new Uint8Array(event.data));
        const message = JSON.parse(event.data);
        if (message.type === 'terminal' && !left) keepInAddress(message.id);
      });
      opened.addEventListener('close', (event) => {
        if (socket !== opened) return;
        // The terminal this tab had is gone (its grace ran out, or the service restarted): a new one.
        if (!attached && attachTo !== null && !left) {
          keepInAddress(null);
          return connect(null);
        }
        socket = null;
        if (left) return;
        if (event.code !== TAKEN) keepInAddress(null);
        holder.dataset.terminal = 'closed';
        resizes.disconnect();
        const why = event.code === ENDED ? 'The terminal has ended.'
          : event.code === TAKEN ? 'The terminal was opened in another tab.'
          : attached ? 'The connection to the terminal was lost.' : 'The terminal could not be opened.';
        body.prepend(alertBox(event.code === ENDED || event.code === TAKEN ? 'info' : 'error', why));
        openButton.textContent = 'Open a new terminal';
        openButton.hidden = status !== 'running';
      });
    };
    connect(terminalInAddress());
    session = {
      close() {
        resizes.disconnect();
        const current = socket;
        socket = null;
        current?.close(1000, 'the page closed it');
        term.dispose();
      },
    };
  }

  /** The machine's status changed (or is first known). @param {string} next */
  function setStatus(next) {
    if (next === status) return;
    status = next;
    if (status === 'running') {
      openButton.hidden = false;
      replace(body, h('p', { class: 'muted' }, 'Open a terminal to run commands in the machine from this page.'));
      if (terminalInAddress() !== null) void open();
      return;
    }
    session?.close();
    session = null;
    openButton.hidden = true;
    replace(body, h('div', { class: 'empty' },
      h('h3', null, `The machine is ${STATES[status] ?? 'not running'}.`),
      h('p', null, status === 'destroyed' ? 'Its terminal went with it.' : 'Its terminal opens here while it runs.')));
  }

  return { element, setStatus };
}
