// The dashboard speaks to the same JSON API as everyone else, with the session
// cookie (same origin, so the browser adds it and the origin rule lets it in).

export class ApiError extends Error {
  /**
   * @param {number} status  0 when the service could not be reached
   * @param {string} code    the problem's stable code
   * @param {string} title
   * @param {string} detail  the sentence shown to people
   */
  constructor(status, code, title, detail) {
    super(detail);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.title = title;
  }
}

/** Fired when the session is gone (signed out elsewhere, expired, password reset). */
export const SESSION_ENDED = 'dashboard:session-ended';

/** The code of a 403 for an action that needs the password or a code entered in the last minutes. */
export const REAUTHENTICATION_REQUIRED = 'reauthentication_required';

/** @type {(() => Promise<boolean>) | null} */
let reauthenticationPrompt = null;
/** @type {Promise<boolean> | null} */
let pendingPrompt = null;

/**
 * Who asks for the password or a code when an action needs a recent
 * authentication (reauth.js): resolves true once the API renewed it.
 * @param {() => Promise<boolean>} prompt
 */
export function setReauthenticationPrompt(prompt) {
  reauthenticationPrompt = prompt;
}

/** One prompt at a time, however many requests were refused together. */
function askToReauthenticate() {
  if (reauthenticationPrompt === null) return Promise.resolve(false);
  pendingPrompt ??= reauthenticationPrompt().finally(() => {
    pendingPrompt = null;
  });
  return pendingPrompt;
}

/**
 * An action the API refuses with `403 reauthentication_required` (turning a
 * factor off, new recovery codes, a new API key) asks for the password or a
 * code, then is sent once more; cancelling the prompt throws the refusal.
 * @param {'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'} method
 * @param {string} path  starts with /api/
 * @param {unknown} [body]  sent as JSON when given
 * @param {Record<string, string>} [extraHeaders]  e.g. an Idempotency-Key
 * @param {{ signal?: AbortSignal }} [options]  `signal` cancels the request (a long poll whose view closed)
 * @returns {Promise<any>} the parsed JSON body, or null for 204
 * @throws {ApiError} on any non-2xx answer or a network failure; the signal's reason when it aborted
 */
export async function api(method, path, body, extraHeaders = {}, options = {}) {
  /** @type {Record<string, string>} */
  const headers = { ...extraHeaders, accept: 'application/json' };
  /** @type {RequestInit} */
  const init = { method, headers, signal: options.signal };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await send(path, init);
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== REAUTHENTICATION_REQUIRED) throw error;
    if (!(await askToReauthenticate())) {
      throw new ApiError(error.status, error.code, error.title, 'Nothing was changed: this needs you to confirm it is you (your password or a code) first.');
    }
    response = await send(path, init);
  }
  if (response.status === 204) return null;
  const text = await response.text();
  try {
    return text === '' ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * A request whose body or answer is bytes, not JSON (a machine's files): the
 * answer itself, to read as a blob, or as JSON when its type says so.
 * @param {'GET' | 'PUT' | 'DELETE'} method
 * @param {string} path  starts with /api/
 * @param {{ body?: Blob, signal?: AbortSignal }} [options]  `body` is sent as application/octet-stream
 * @returns {Promise<Response>} a 2xx answer
 * @throws {ApiError} on any non-2xx answer or a network failure
 */
export function apiRaw(method, path, options = {}) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/octet-stream, application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/octet-stream';
  return send(path, { method, headers, body: options.body, signal: options.signal });
}

/**
 * Sends with the session cookie; a non-2xx answer becomes an ApiError with its problem's detail.
 * @param {string} path
 * @param {RequestInit} init
 * @returns {Promise<Response>}
 */
async function send(path, init) {
  let response;
  try {
    response = await fetch(path, { ...init, credentials: 'same-origin', cache: 'no-store' });
  } catch (caught) {
    if (init.signal?.aborted) throw caught;
    throw new ApiError(0, 'network_error', 'Network error', 'The service could not be reached. Check your connection and try again.');
  }
  if (response.ok) return response;
  /** @type {any} */
  let json = null;
  try {
    const text = await response.text();
    json = text === '' ? null : JSON.parse(text);
  } catch {
    // handled below: a non-JSON body is reported by status
  }
  const error = json && typeof json.detail === 'string'
    ? new ApiError(response.status, String(json.code ?? 'error'), String(json.title ?? 'Error'), json.detail)
    : new ApiError(response.status, 'http_error', `HTTP ${response.status}`, `The service answered with HTTP ${response.status}. Try again in a moment.`);
  if (error.status === 401 && error.code === 'unauthenticated') window.dispatchEvent(new CustomEvent(SESSION_ENDED));
  throw error;
}

/** The sentence to show for any error a page catches. @param {unknown} error */
export function messageOf(error) {
  if (error instanceof ApiError) return readableDetail(error.message);
  // A passkey the browser could not use (webauthn.js) says why in a sentence of its own.
  if (error instanceof Error && error.name === 'PasskeyError') return error.message;
  return 'Something went wrong in the dashboard. Reload the page and try again.';
}

/** @type {Record<string, string>} */
const ACRONYMS = { url: 'URL', id: 'ID' };

/**
 * A problem's detail as a sentence. Validation details name the field as the
 * API does ("body/url must NOT have …", "url is not reachable …"): drop the
 * prefix, soften the capitals, start with a capital letter.
 * @param {string} detail
 */
export function readableDetail(detail) {
  const text = detail.replace(/^body\//, '').replace(/\bmust NOT\b/g, 'must not');
  const [first = '', ...rest] = text.split(' ');
  const lead = ACRONYMS[first] ?? first.charAt(0).toUpperCase() + first.slice(1);
  return [lead, ...rest].join(' ');
}

/**
 * The field a 400's detail is about, when it starts with a field's name
 * ("url is not reachable …", "body/name must NOT …"); null otherwise.
 * @param {unknown} error
 */
export function fieldOf(error) {
  if (!(error instanceof ApiError) || error.status !== 400) return null;
  return /^(?:body\/)?([A-Za-z][A-Za-z0-9_]*)(?=[\s/.]|$)/.exec(error.message)?.[1] ?? null;
}

/** Lists answer {data, nextCursor}; accept a bare array too. @param {any} page @returns {any[]} */
export function itemsOf(page) {
  if (Array.isArray(page)) return page;
  return Array.isArray(page?.data) ? page.data : [];
}

/**
 * A long list read a page at a time, newest first (by id, as every list
 * answers): `read()` reads its first page (again), `more()` appends the next
 * one, `forget()` starts again from nothing when what is asked changes (a
 * filter); `shown` is what has been read, `nextCursor` null once there is no
 * more. A page polled while something on it is still on its way reads the
 * first page again: the older pages already loaded stay below it, so a poll
 * never undoes "Load older".
 * @template {{ id: string }} T
 * @param {(cursor: string | null) => Promise<unknown>} fetchPage
 */
export function pagedList(fetchPage) {
  // A read answered after a forget() is about what was asked before: dropped.
  let asked = 0;
  const list = {
    /** @type {T[]} */
    shown: [],
    /** @type {string | null} */
    nextCursor: null,
    async read() {
      const question = asked;
      const page = /** @type {any} */ (await fetchPage(null));
      if (question !== asked) return;
      /** @type {T[]} */
      const first = itemsOf(page);
      const oldestRead = first.at(-1);
      const newestShown = list.shown[0];
      // Older items stay only where the first page reaches what was shown: no gap between them.
      const older = page?.nextCursor && oldestRead && newestShown && oldestRead.id <= newestShown.id
        ? list.shown.filter((item) => item.id < oldestRead.id)
        : [];
      list.shown = [...first, ...older];
      if (older.length === 0) list.nextCursor = page?.nextCursor ?? null;
    },
    async more() {
      const question = asked;
      const page = /** @type {any} */ (await fetchPage(list.nextCursor));
      if (question !== asked) return;
      const shownIds = new Set(list.shown.map((item) => item.id));
      list.shown = [...list.shown, ...itemsOf(page).filter((item) => !shownIds.has(item.id))];
      list.nextCursor = page?.nextCursor ?? null;
    },
    forget() {
      asked += 1;
      list.shown = [];
      list.nextCursor = null;
    },
  };
  return list;
}

/**
 * Every page of a list (the dashboard's lists are short: keys, sessions, endpoints).
 * @param {string} path
 * @param {number} [maxPages]
 */
export async function listAll(path, maxPages = 10) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const separator = path.includes('?') ? '&' : '?';
    const answer = await api('GET', `${path}${separator}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...itemsOf(answer));
    cursor = answer?.nextCursor ?? null;
    if (!cursor) break;
  }
  return items;
}
