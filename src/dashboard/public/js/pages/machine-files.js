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

/** Where commands run: the folder shown first. */
const HOME = '/root';
/** An upload is at most 100 MiB. */
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

/**
 * @typedef {object} UploadForm
 * @property {HTMLFormElement} form
 * @property {HTMLInputElement} input
 * @property {HTMLElement} hint  names the folder the file goes into
 * @property {HTMLButtonElement} button
 * @property {HTMLElement} error
 */

/**
 * @typedef {object} FilesView  the section's parts, and the folder it shows
 * @property {(path: string, recursive?: boolean) => string} urlOf  a path's address in the API
 * @property {string} path  the folder shown
 * @property {FileEntry[]} entries  the folder's, folders first
 * @property {boolean} listed  whether a folder has been listed: the path and the upload form show only beside one
 * @property {string} status  the machine's
 * @property {HTMLElement} crumbs
 * @property {HTMLElement} toolbar
 * @property {HTMLElement} body
 * @property {HTMLButtonElement} refreshButton
 * @property {UploadForm} upload
 */

/** @param {string} machineId */
export function filesSection(machineId) {
  const base = `/api/machines/${encodeURIComponent(machineId)}/files`;
  const crumbs = h('nav', { class: 'path-crumbs', 'aria-label': 'Folder' });
  const body = h('div', null, loading('Loading files…'));
  const refreshButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn btn--small' }, 'Refresh'));
  const upload = uploadForm();
  /** @type {FilesView} */
  const view = {
    urlOf: (path, recursive = false) => `${base}?${new URLSearchParams({ path, ...(recursive ? { recursive: 'true' } : {}) })}`,
    path: HOME,
    entries: [],
    listed: false,
    status: '',
    crumbs,
    toolbar: h('div', { class: 'card__body stack stack--tight' }, crumbs, upload.form),
    body,
    refreshButton,
    upload,
  };
  refreshButton.addEventListener('click', () => openFolder(view, view.path));
  handleSubmit(upload.form, upload.button, upload.error, () => uploadFile(view));
  const element = card({
    title: 'Files',
    id: 'files',
    flush: true,
    description: 'The machine’s disk while it runs: open folders, download and upload files, delete what is no longer needed.',
    actions: [refreshButton],
  }, view.toolbar, body);

  /** The machine's status changed (or is first known): read the folder again. @param {string} next */
  function setStatus(next) {
    if (next === view.status) return;
    view.status = next;
    openFolder(view, view.path);
  }

  return { element, setStatus };
}

/**
 * The upload form; a file past the limit is refused before it is sent.
 * @returns {UploadForm}
 */
function uploadForm() {
  const fileId = uid('upload-file');
  const input = /** @type {HTMLInputElement} */ (h('input', { type: 'file', id: fileId, name: 'file', class: 'input input--file', required: true, 'aria-describedby': `${fileId}-hint` }));
  const hint = h('div', { class: 'field__hint upload__hint', id: `${fileId}-hint` });
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'btn' }, 'Upload'));
  const error = h('div');
  const form = /** @type {HTMLFormElement} */ (h('form', { class: 'upload', 'aria-label': 'Upload' },
    h('div', { class: 'field upload__field' }, h('label', { for: fileId }, 'Upload a file'), input),
    button,
    hint,
    h('div', { class: 'upload__error' }, error)));
  input.addEventListener('change', () => {
    const file = input.files?.[0];
    input.setCustomValidity(file && file.size > UPLOAD_LIMIT ? `This file is ${formatBytes(file.size)}; an upload is at most 100 MiB.` : '');
  });
  return { form, input, hint, button, error };
}

/**
 * Shows the folder at `next`; on failure the folder shown stays.
 * @param {FilesView} view
 * @param {string} next
 * @param {{ focus?: boolean }} [options]  moves focus to the folder's name (after opening one from the list)
 */
async function openFolder(view, next, options = {}) {
  view.refreshButton.setAttribute('aria-busy', 'true');
  try {
    /** @type {{ path: string, entries: FileEntry[] }} */
    const listing = await api('GET', view.urlOf(next));
    view.path = listing.path;
    view.entries = [...listing.entries].sort(byKindThenName);
    view.listed = true;
    view.toolbar.hidden = false;
    drawFolder(view);
    view.refreshButton.hidden = false;
    if (options.focus) /** @type {HTMLElement | null} */ (view.crumbs.querySelector('[aria-current]'))?.focus();
  } catch (error) {
    showError(view, error, next);
  } finally {
    view.refreshButton.removeAttribute('aria-busy');
  }
}

/** @param {FilesView} view @param {unknown} error @param {string} wanted */
function showError(view, error, wanted) {
  if (error instanceof ApiError && error.status === 404) {
    const elsewhere = wanted === HOME ? '/' : HOME;
    const home = h('button', { type: 'button', class: 'btn btn--small' }, `Open ${elsewhere}`);
    home.addEventListener('click', () => openFolder(view, elsewhere, { focus: true }));
    replace(view.body, h('div', { class: 'card__body' }, alertBox('error', h('span', null, `${wanted} does not exist on the machine (any more). `, wanted === '/' ? null : home))));
    return;
  }
  const unavailable = error instanceof ApiError && (error.code === 'not_supported' || error.code === 'invalid_state');
  // The path and the upload form only beside a folder that was listed.
  view.toolbar.hidden = unavailable || !view.listed;
  view.refreshButton.hidden = error instanceof ApiError && error.code === 'not_supported';
  replace(view.body, unavailableState(error, 'files', view.status));
}

/** @param {FilesView} view */
function drawFolder(view) {
  drawCrumbs(view);
  view.upload.hint.textContent = `Into ${view.path}; a file of the same name is replaced. At most 100 MiB.`;
  replace(view.body, view.entries.length === 0
    ? h('div', { class: 'empty' }, h('h3', null, 'This folder is empty'), h('p', null, 'Upload a file into it, or open another folder above.'))
    : table(`Files in ${view.path}`, ['Name', 'Size', 'Modified', ''], view.entries.map((entry) => entryRow(view, entry))));
}

/** The path as buttons, "/ root / docs": each opens its folder; the last is the folder shown. @param {FilesView} view */
function drawCrumbs(view) {
  const parts = view.path.split('/').filter(Boolean);
  const items = [crumb(view, '/', '/', parts.length === 0, 'the root folder /')];
  parts.forEach((part, index) => {
    if (index > 0) items.push(h('span', { class: 'path-crumbs__separator', 'aria-hidden': 'true' }, '/'));
    items.push(crumb(view, `/${parts.slice(0, index + 1).join('/')}`, part, index === parts.length - 1));
  });
  replace(view.crumbs, ...items);
}

/**
 * @param {FilesView} view
 * @param {string} target  the folder's path
 * @param {string} text  what is shown
 * @param {boolean} current
 * @param {string} [label]  how the button names its folder
 */
function crumb(view, target, text, current, label = target) {
  if (current) return h('span', { class: 'path-crumbs__current mono', 'aria-current': 'location', tabindex: '-1', title: target }, text);
  const button = h('button', { type: 'button', class: 'link-button mono', 'aria-label': `Open ${label}` }, text);
  button.addEventListener('click', () => openFolder(view, target, { focus: true }));
  return button;
}

/** @param {FilesView} view @param {FileEntry} entry */
function entryRow(view, entry) {
  const full = joinPath(view.path, entry.name);
  /** @param {string} label @param {string} name @param {(button: HTMLButtonElement) => Promise<void>} run @param {string} [extra] */
  const action = (label, name, run, extra = '') => {
    const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: `btn btn--small ${extra}`.trim(), 'aria-label': name }, label));
    button.addEventListener('click', () => run(button));
    return button;
  };
  const name = entry.type === 'directory'
    ? h('button', { type: 'button', class: 'link-button', 'aria-label': `Open folder ${entry.name}`, onclick: () => openFolder(view, full, { focus: true }) }, `${entry.name}/`)
    : h('span', null, entry.name);
  const kind = entry.type === 'directory' ? 'Folder' : entry.type === 'symlink' ? 'Link' : 'File';
  const actions = [];
  if (entry.type === 'file') actions.push(action('Download', `Download ${entry.name}`, (button) => download(view, button, full, entry.name)));
  if (entry.type === 'symlink') actions.push(action('Open', `Open link ${entry.name}`, (button) => download(view, button, full, entry.name)));
  actions.push(action('Delete', `Delete ${entry.name}`, () => removeEntry(view, entry, full), 'btn--danger-outline'));
  return h('tr', { dataset: { entry: entry.name, type: entry.type } },
    h('td', { class: 'table__main' }, h('div', { class: 'table__primary mono' }, name), h('div', { class: 'table__secondary' }, kind)),
    cell('Size', entry.type === 'directory' ? h('span', { class: 'muted' }, '—') : h('span', { title: `${entry.size.toLocaleString()} bytes` }, formatBytes(entry.size))),
    cell('Modified', timeElement(entry.modifiedAt)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, actions)));
}

/**
 * Reads a file (or what a link points to: a folder opens, a file downloads).
 * @param {FilesView} view @param {HTMLButtonElement} button @param {string} full @param {string} name
 */
async function download(view, button, full, name) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    const response = await apiRaw('GET', view.urlOf(full));
    if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
      await response.body?.cancel();
      await openFolder(view, full, { focus: true });
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

/** Uploads the chosen file into the folder shown, asking first before it replaces one. @param {FilesView} view */
async function uploadFile(view) {
  const file = view.upload.input.files?.[0];
  if (!file) return;
  const target = joinPath(view.path, file.name);
  const existing = view.entries.find((entry) => entry.name === file.name);
  const put = () => apiRaw('PUT', view.urlOf(target), { body: file }).then(() => {});
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
  toast(`${file.name} uploaded to ${view.path}.`);
  view.upload.form.reset();
  await openFolder(view, view.path);
}

/** @param {FilesView} view @param {FileEntry} entry @param {string} full */
async function removeEntry(view, entry, full) {
  const folder = entry.type === 'directory';
  const deleted = await confirmAction({
    title: `Delete ${entry.name}?`,
    message: h('p', null, folder ? 'The folder ' : '', h('strong', { class: 'break' }, full), folder
      ? ' and everything in it are deleted from the machine. This cannot be undone.'
      : ' is deleted from the machine. This cannot be undone.'),
    confirmLabel: folder ? 'Delete folder' : entry.type === 'symlink' ? 'Delete link' : 'Delete file',
    danger: true,
    acknowledge: folder ? `Delete everything inside ${entry.name} too` : undefined,
    action: () => apiRaw('DELETE', view.urlOf(full, folder)).then(() => {}),
  });
  if (!deleted) return;
  toast(`${full} deleted.`);
  await openFolder(view, view.path);
  view.refreshButton.focus();
}
