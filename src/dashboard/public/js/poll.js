// Reading something again and again while it is shown: a list with a row
// still on its way, a machine changing status, a screen looked at, a run
// that has not ended. The page says how to read and whether to read again;
// the timer lives here, and leaving the page (or closing the dialog) ends it.

/**
 * @typedef {object} Poll
 * @property {() => Promise<void>} refresh  reads now (a button, an action, a status change), then again every `ms` while the read asks for it
 * @property {() => void} later  reads once `ms` have passed (what is shown was read a moment ago)
 * @property {() => void} pause  drops the read that is waiting; the next `refresh` starts again
 * @property {() => boolean} stillShown  false once the page is left: a read that ends after it draws nothing
 */

/**
 * @param {(cleanup: () => void) => void} onCleanup  the page's (or a dialog's close)
 * @param {() => Promise<boolean>} read  reads and draws; answers whether to read again in `ms`
 * @param {number} ms
 * @returns {Poll}
 */
export function poll(onCleanup, read, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let shown = true;
  onCleanup(() => {
    shown = false;
    clearTimeout(timer);
  });

  async function refresh() {
    clearTimeout(timer);
    const again = await read();
    if (again) later();
  }

  function later() {
    clearTimeout(timer);
    if (shown) timer = setTimeout(refresh, ms);
  }

  return { refresh, later, pause: () => clearTimeout(timer), stillShown: () => shown };
}
