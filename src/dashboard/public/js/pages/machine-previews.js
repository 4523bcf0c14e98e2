// A machine's previews on its page: the ports made public, a
// signed link to open a port in a browser, a port made public or private.
import { api, messageOf } from '../api.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { formatDate } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';

/**
 * @typedef {object} PreviewSettings
 * @property {string | null} previewToken
 * @property {string} urlTemplate
 * @property {{ port: number, url: string }[]} publicPorts
 */

/** @param {string} machineId */
export function previewsSection(machineId) {
  const path = `/api/machines/${encodeURIComponent(machineId)}/previews`;
  const body = h('div', null, loading('Loading previews…'));
  const linkSlot = h('div', { 'aria-live': 'polite' });

  const port = field({ label: 'Port', name: 'port', type: 'number', required: true, inputmode: 'numeric', hint: 'Where an HTTP server listens in the machine (1–65535).' });
  port.input.min = '1';
  port.input.max = '65535';
  const portNumber = () => Number(port.input.value);

  const makePublic = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Make public'));
  makePublic.addEventListener('click', async () => {
    if (!port.input.reportValidity()) return;
    makePublic.disabled = true;
    try {
      await api('PATCH', `${path}/${portNumber()}`, { public: true });
      toast(`Port ${portNumber()} is public: anyone with its URL can open it.`);
      await refresh();
    } catch (error) {
      toast(messageOf(error), 'error');
    } finally {
      makePublic.disabled = false;
    }
  });

  const { form } = simpleForm({
    label: 'Open a port',
    fields: [port.wrapper],
    submitLabel: 'Make a link (1 hour)',
    secondary: makePublic,
    onSubmit: async () => {
      /** @type {{ url: string, expiresAt: string }} */
      const link = await api('POST', path, { port: portNumber() });
      replace(linkSlot, alertBox('success', h('span', null,
        h('a', { href: link.url, target: '_blank', rel: 'noopener noreferrer', class: 'break' }, `Open port ${portNumber()}`),
        ` — works until ${formatDate(link.expiresAt)} for whoever holds it.`)));
    },
  });

  const element = card({
    title: 'Previews',
    id: 'machine-previews',
    description: 'HTTP servers in the machine, at a URL of their own. Private unless made public: open them with a signed link, or send the preview token as X-Preview-Token.',
  }, body, form, linkSlot);

  async function refresh() {
    try {
      /** @type {PreviewSettings} */
      const settings = await api('GET', path);
      draw(settings);
    } catch (error) {
      replace(body, alertBox('error', messageOf(error)));
    }
  }

  /** @param {PreviewSettings} settings */
  function draw(settings) {
    const rows = settings.publicPorts.map(({ port: number, url }) => {
      const makePrivate = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Make private'));
      makePrivate.addEventListener('click', async () => {
        makePrivate.disabled = true;
        try {
          await api('PATCH', `${path}/${number}`, { public: false });
          toast(`Port ${number} is private again.`);
          await refresh();
        } catch (error) {
          makePrivate.disabled = false;
          toast(messageOf(error), 'error');
        }
      });
      return h('tr', null, cell('Port', String(number)), cell('URL', h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', class: 'mono break' }, url)), cell('', makePrivate));
    });
    replace(body,
      h('p', { class: 'muted small' }, 'URL of a port: ', h('code', { class: 'break' }, settings.urlTemplate)),
      rows.length === 0 ? h('p', { class: 'muted' }, 'No public ports.') : table('Public ports', ['Port', 'URL', ''], rows),
      settings.previewToken === null ? null : h('details', null, h('summary', null, 'Preview token'), h('code', { class: 'mono break' }, settings.previewToken)));
  }

  let lastStatus = '';
  return {
    element,
    /** @param {string} status */
    setStatus(status) {
      if (status === lastStatus) return;
      lastStatus = status;
      refresh();
    },
  };
}
