// A running machine's files: a folder at a time (its path as a breadcrumb),
// files downloaded through the session (fetched, then saved from an object
// URL), one uploaded into the folder shown, and deletion after confirming
// (a folder only with everything in it, ticked explicitly).
import { api, ApiError, apiRaw, messageOf } from '../api.js';
import { confirmAction } from '../dialog.js';
import { alertBox, cell, h, loading, replace, table, uid } from '../dom.js';
import { formatBytes, timeElement } from '../format.js';
import { handleSubmit } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';
import { unavailableState } from './machine-access.js';

/**
 * @typedef {object} FileEntry
 * @property {string} name
 * @property {'file' | 'directory' | 'symlink'} type
 * @property {number} size
 * @property {string} modifiedAt
 */

/** Where commands run (CONTRACT 15): the folder shown first. */
const HOME = '/root';
/** CONTRACT 15: an upload is at most 100 MiB. */
const UPLOAD_LIMIT = 100 * 1024 * 1024;

/** @param {string} folder @param {string} name */
export function joinPath(folder, name) {
  return folder === '/' ? `/${name}` : `${folder}/${name}`;
}

/** Saves bytes the page holds as a download named `name` (an object URL: no second request, no credential in a link). @param {Blob} blob @param {string} name */
function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = h('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // Revoked once the browser has taken the download over.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** @param {FileEntry} a @param {FileEntry} b */
function byKindThenName(a, b) {
  return Number(b.type === 'directory') - Number(a.type === 'directory') || a.name.localeCompare(b.name);
}

/** @param {string} machineId */
export function filesSection(machineId) {
  const base = `/api/machines/${encodeURIComponent(machineId)}/files`;
  const urlOf = (/** @type {string} */ path, recursive = false) => `${base}?${new URLSearchParams({ path, ...(recursive ? { recursive: 'true' } : {}) })}`;
  let path = HOME;
  let status = '';
  /** @type {FileEntry[]} */
  let entries = [];
  let listed = false;

  const crumbs = h('nav', { class: 'path-crumbs', 'aria-label': 'Folder' });
  const body = h('div', null, loading('Loading files…'));
  const refreshButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Refresh'));
  refreshButton.addEventListener('click', () => open(path));

  const fileId = uid('upload-file');
  const fileInput = /** @type {HTMLInputElement} */ (h('input', { type: 'file', id: fileId, name: 'file', class: 'input input--file', required: true, 'aria-describedby': `${fileId}-hint` }));
  const uploadHint = h('div', { class: 'field__hint upload__hint', id: `${fileId}-hint` });
  const uploadButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'btn' }, 'Upload'));
  const uploadError = h('div');
  const uploadForm = /** @type {HTMLFormElement} */ (h('form', { class: 'upload', 'aria-label': 'Upload' },
    h('div', { class: 'field upload__field' }, h('label', { for: fileId }, 'Upload a file'), fileInput),
    uploadButton,
    uploadHint,
    h('div', { class: 'upload__error' }, uploadError)));
  fileInput.addEventListener('change', () => {
    const file = fileInput.files?.[0];
    fileInput.setCustomValidity(file && file.size > UPLOAD_LIMIT ? `This file is ${formatBytes(file.size)}; an upload is at most 100 MiB.` : '');
  });
  handleSubmit(uploadForm, uploadButton, uploadError, upload);

  const toolbar = h('div', { class: 'card__body stack stack--tight' }, crumbs, uploadForm);
  const element = card({
    title: 'Files',
    id: 'files',
    flush: true,
    description: 'The machine’s disk while it runs: open folders, download and upload files, delete what is no longer needed.',
    actions: [refreshButton],
  }, toolbar, body);

  /**
   * Shows the folder at `next`; on failure the folder shown stays.
   * @param {string} next
   * @param {{ focus?: boolean }} [options]  moves focus to the folder's name (after opening one from the list)
   */
  async function open(next, options = {}) {
    refreshButton.setAttribute('aria-busy', 'true');
    try {
      /** @type {{ path: string, entries: FileEntry[] }} */
      const listing = await api('GET', urlOf(next));
      path = listing.path;
      entries = [...listing.entries].sort(byKindThenName);
      listed = true;
      toolbar.hidden = false;
      draw();
      refreshButton.hidden = false;
      if (options.focus) /** @type {HTMLElement | null} */ (crumbs.querySelector('[aria-current]'))?.focus();
    } catch (error) {
      showError(error, next);
    } finally {
      refreshButton.removeAttribute('aria-busy');
    }
  }

  /** @param {unknown} error @param {string} wanted */
  function showError(error, wanted) {
    if (error instanceof ApiError && error.status === 404) {
      const elsewhere = wanted === HOME ? '/' : HOME;
      const home = h('button', { type: 'button', class: 'btn btn--small' }, `Open ${elsewhere}`);
      home.addEventListener('click', () => open(elsewhere, { focus: true }));
      replace(body, h('div', { class: 'card__body' }, alertBox('error', h('span', null, `${wanted} does not exist on the machine (any more). `, wanted === '/' ? null : home))));
      return;
    }
    const unavailable = error instanceof ApiError && (error.code === 'not_supported' || error.code === 'invalid_state');
    // The path and the upload form only beside a folder that was listed.
    toolbar.hidden = unavailable || !listed;
    refreshButton.hidden = error instanceof ApiError && error.code === 'not_supported';
    replace(body, unavailableState(error, 'files', status));
  }

  function draw() {
    drawCrumbs();
    uploadHint.textContent = `Into ${path}; a file of the same name is replaced. At most 100 MiB.`;
    replace(body, entries.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'This folder is empty'), h('p', null, 'Upload a file into it, or open another folder above.'))
      : table(`Files in ${path}`, ['Name', 'Size', 'Modified', ''], entries.map(row)));
  }

  /** The path as buttons, "/ root / docs": each opens its folder; the last is the folder shown. */
  function drawCrumbs() {
    const parts = path.split('/').filter(Boolean);
    const items = [crumb('/', '/', parts.length === 0, 'the root folder /')];
    parts.forEach((part, index) => {
      if (index > 0) items.push(h('span', { class: 'path-crumbs__separator', 'aria-hidden': 'true' }, '/'));
      items.push(crumb(`/${parts.slice(0, index + 1).join('/')}`, part, index === parts.length - 1));
    });
    replace(crumbs, ...items);
  }

  /**
   * @param {string} target  the folder's path
   * @param {string} text  what is shown
   * @param {boolean} current
   * @param {string} [label]  how the button names its folder
   */
  function crumb(target, text, current, label = target) {
    if (current) return h('span', { class: 'path-crumbs__current mono', 'aria-current': 'location', tabindex: '-1', title: target }, text);
    const button = h('button', { type: 'button', class: 'link-button mono', 'aria-label': `Open ${label}` }, text);
    button.addEventListener('click', () => open(target, { focus: true }));
    return button;
  }

  /** @param {FileEntry} entry */
  function row(entry) {
    const full = joinPath(path, entry.name);
    /** @param {string} label @param {string} name @param {(button: HTMLButtonElement) => Promise<void>} run @param {string} [extra] */
    const action = (label, name, run, extra = '') => {
      const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: `btn btn--small ${extra}`.trim(), 'aria-label': name }, label));
      button.addEventListener('click', () => run(button));
      return button;
    };
    const name = entry.type === 'directory'
      ? h('button', { type: 'button', class: 'link-button', 'aria-label': `Open folder ${entry.name}`, onclick: () => open(full, { focus: true }) }, `${entry.name}/`)
      : h('span', null, entry.name);
    const kind = entry.type === 'directory' ? 'Folder' : entry.type === 'symlink' ? 'Link' : 'File';
    const actions = [];
    if (entry.type === 'file') actions.push(action('Download', `Download ${entry.name}`, (button) => download(button, full, entry.name)));
    if (entry.type === 'symlink') actions.push(action('Open', `Open link ${entry.name}`, (button) => download(button, full, entry.name)));
    actions.push(action('Delete', `Delete ${entry.name}`, () => remove(entry, full), 'btn--danger-outline'));
    return h('tr', { dataset: { entry: entry.name, type: entry.type } },
      h('td', { class: 'table__main' }, h('div', { class: 'table__primary mono' }, name), h('div', { class: 'table__secondary' }, kind)),
      cell('Size', entry.type === 'directory' ? h('span', { class: 'muted' }, '—') : h('span', { title: `${entry.size.toLocaleString()} bytes` }, formatBytes(entry.size))),
      cell('Modified', timeElement(entry.modifiedAt)),
      h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, actions)));
  }

  /**
   * Reads a file (or what a link points to: a folder opens, a file downloads).
   * @param {HTMLButtonElement} button @param {string} full @param {string} name
   */
  async function download(button, full, name) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      const response = await apiRaw('GET', urlOf(full));
      if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
        await response.body?.cancel();
        await open(full, { focus: true });
        return;
      }
      saveBlob(await response.blob(), name);
      toast(`${name} downloaded.`);
    } catch (error) {
      toast(messageOf(error), 'error');
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  async function upload() {
    const file = fileInput.files?.[0];
    if (!file) return;
    const target = joinPath(path, file.name);
    const existing = entries.find((entry) => entry.name === file.name);
    const put = () => apiRaw('PUT', urlOf(target), { body: file }).then(() => {});
    if (existing?.type === 'directory') throw new ApiError(409, 'conflict', 'Conflict', `${target} is a folder: rename the file, or delete the folder first.`);
    if (existing) {
      const replaced = await confirmAction({
        title: `Replace ${file.name}?`,
        message: h('p', null, h('strong', { class: 'break' }, target), ' already exists on the machine. Uploading replaces it.'),
        confirmLabel: 'Replace file',
        danger: true,
        action: put,
      });
      if (!replaced) return;
    } else {
      await put();
    }
    toast(`${file.name} uploaded to ${path}.`);
    uploadForm.reset();
    await open(path);
  }

  /** @param {FileEntry} entry @param {string} full */
  async function remove(entry, full) {
    const folder = entry.type === 'directory';
    const deleted = await confirmAction({
      title: `Delete ${entry.name}?`,
      message: h('p', null, folder ? 'The folder ' : '', h('strong', { class: 'break' }, full), folder
        ? ' and everything in it are deleted from the machine. This cannot be undone.'
        : ' is deleted from the machine. This cannot be undone.'),
      confirmLabel: folder ? 'Delete folder' : entry.type === 'symlink' ? 'Delete link' : 'Delete file',
      danger: true,
      acknowledge: folder ? `Delete everything inside ${entry.name} too` : undefined,
      action: () => apiRaw('DELETE', urlOf(full, folder)).then(() => {}),
    });
    if (!deleted) return;
    toast(`${full} deleted.`);
    await open(path);
    refreshButton.focus();
  }

  /** The machine's status changed (or is first known): read the folder again. @param {string} next */
  function setStatus(next) {
    if (next === status) return;
    status = next;
    open(path);
  }

  return { element, setStatus };
}
