import { escapeHtml } from '../shared/html.ts';
import { MINUTE, toIso } from '../shared/clock.ts';
import type { Deps } from '../deps.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { deleteLiveViewsOfMachine, findLiveViewLink, findLiveViewMachine, insertLiveView } from './live-views.repository.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { toProviderMachine } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { MachineProvider } from '../providers/provider.ts';

export const LIVE_VIEW_LIFETIME_MS = 15 * MINUTE;
export const LIVE_VIEW_PATH = '/live';

export interface LiveViewLink {
  url: string;
  expiresAt: string;
}

/** What a browser gets for a link: the screen, or a page saying the link no longer works (never problem+json: a person opened it). */
export interface LiveViewPage {
  status: 200 | 404;
  html: string;
  /** The machine shown; null when the link is unknown or expired. */
  machineId: string | null;
}

/**
 * A link anyone holding it can open for 15 minutes; only its hash is stored.
 * @throws AppError 404 unknown machine, 409 invalid_state for a destroyed one.
 */
export async function createLiveView(deps: Deps, accountId: string, machineId: string): Promise<LiveViewLink> {
  const machine = await getMachineRow(deps, accountId, machineId);
  if (machine.status === 'destroyed') throw wrongStatus('be viewed', machine.status);
  const now = deps.clock.now();
  const token = generateOpaqueToken();
  const expiresAt = now + LIVE_VIEW_LIFETIME_MS;
  await insertLiveView(deps.db, { token_hash: hashToken(token), account_id: accountId, machine_id: machine.id, expires_at: expiresAt, created_at: now });
  return { url: `${deps.config.publicUrl}${LIVE_VIEW_PATH}/${token}`, expiresAt: toIso(expiresAt) };
}

/**
 * The page is one window high: the heading and the status line keep their
 * height and the screen (noVNC's canvas, or the picture) is scaled into what
 * is left, so the status line is never below the fold whatever the screen's
 * size. `[hidden]` wins over every display rule: the picture and the stream
 * each hide the other, and an element rule would otherwise keep showing it.
 */
const STYLE = [
  '[hidden]{display:none!important}',
  'body{margin:0;background:#0d1117;color:#f0f6fc;font-family:sans-serif}',
  'main{box-sizing:border-box;height:100vh;height:100dvh;display:flex;flex-direction:column;align-items:center;justify-content:center;gap:0.5rem;padding:0.5rem 1rem}',
  'h1{margin:0;font-size:1rem;font-weight:normal;text-align:center}',
  'p{margin:0;text-align:center}',
  '#screen,#picture{flex:1 1 0;min-height:0;width:100%;max-width:1920px}',
  '#picture{object-fit:contain}',
].join('');

function page(title: string, main: string, withScript: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${title}</title>
<style>${STYLE}</style>
${withScript ? `<script type="module" src="${LIVE_VIEW_PATH}/assets/live-view.js"></script>\n` : ''}</head>
<body>
${main}
</body>
</html>
`;
}

/** The machine behind a link that is still valid (not expired, not revoked, machine not destroyed). */
export async function liveViewMachine(deps: Deps, token: string) {
  return findLiveViewMachine(deps.db, hashToken(token), deps.clock.now());
}

/**
 * The page behind a live-view link: the machine's screen as it changes (a
 * view-only stream where the provider has one, else its picture refreshed
 * every few seconds), starting from a picture embedded in the page; or, for a
 * link that expired, never existed, was revoked or whose machine was
 * destroyed, a 404 page saying so. Expired links are deleted, so those cannot
 * be told apart here; the page's script tells expired from revoked by the
 * expiry it was given.
 */
export async function renderLiveView(deps: Deps, provider: MachineProvider, token: string): Promise<LiveViewPage> {
  const found = await findLiveViewMachineAndLink(deps, token);
  if (found === undefined) {
    const main = '<main>\n<h1>This live-view link has expired or is unknown.</h1>\n<p>Live-view links work for 15 minutes. Ask whoever shared it for a new one.</p>\n</main>';
    return { status: 404, html: page('Live view link expired or unknown', main, false), machineId: null };
  }
  const { machine, expiresAt } = found;
  // A machine that is not up (or a host that fails) shows no picture, rather than an error page.
  const screen = await provider.screen(toProviderMachine(machine)).catch(() => null);
  const name = escapeHtml(machine.name);
  const status = escapeHtml(machine.status);
  const picture = screen === null ? '' : `data:${screen.contentType};base64,${screen.body.toString('base64')}`;
  const stream = provider.streamScreen !== undefined && machine.status === 'running' ? 'yes' : 'no';
  const main = `<main data-expires-at="${toIso(expiresAt)}" data-stream="${stream}">
<h1>${name} <span data-status="${status}">(${status})</span></h1>
<div id="screen" hidden aria-label="Screen of ${name}, live"></div>
${screen === null ? `<img id="picture" hidden alt="Screen of ${name}">\n<p>No picture of the screen: the machine is not running, or has no display.</p>` : `<img id="picture" src="${picture}" alt="Screen of ${name}, ${status}">`}
<p id="state" role="status"></p>
</main>`;
  return { status: 200, html: page(`Live view: ${name}`, main, true), machineId: machine.id };
}

async function findLiveViewMachineAndLink(deps: Deps, token: string) {
  const row = await findLiveViewLink(deps.db, hashToken(token), deps.clock.now());
  if (row === undefined) return undefined;
  const { link_expires_at: expiresAt, ...machine } = row;
  return { machine, expiresAt };
}

/** Revokes every live-view link of a machine: their pages stop showing it, and their streams end. */
export async function revokeLiveViews(deps: Deps, accountId: string, machineId: string): Promise<void> {
  await getMachineRow(deps, accountId, machineId);
  await deleteLiveViewsOfMachine(deps.db, machineId);
}
