import { escapeHtml } from '../shared/html.ts';
import { MINUTE, toIso } from '../shared/clock.ts';
import type { Deps } from '../deps.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { findLiveViewMachine, insertLiveView } from './live-views.repository.ts';
import { wrongStatus } from './machines.errors.ts';
import { toProviderMachine } from './machines.repository.ts';
import { getMachineRow } from './machines.service.ts';
import type { MachineProvider } from './provider.ts';

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

function page(title: string, main: string, refresh: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refresh ? '<meta http-equiv="refresh" content="5">\n' : ''}<meta name="robots" content="noindex">
<title>${title}</title>
<style>body{margin:0;min-height:100vh;display:grid;place-items:center;background:#0d1117;color:#f0f6fc;font-family:sans-serif}img{max-width:100vw;height:auto}h1{font-size:1rem;font-weight:normal;text-align:center}</style>
</head>
<body>
<main>
${main}
</main>
</body>
</html>
`;
}

/**
 * The page behind a live-view link: the provider's picture of the screen,
 * refreshed every few seconds; or, for a link that expired, never existed or
 * whose machine was destroyed, a 404 page saying so. Expired links are
 * deleted, so the two cannot be told apart, and the page does not try.
 */
export async function renderLiveView(deps: Deps, provider: MachineProvider, token: string): Promise<LiveViewPage> {
  const machine = await findLiveViewMachine(deps.db, hashToken(token), deps.clock.now());
  if (machine === undefined) {
    const main = '<h1>This live-view link has expired or is unknown.</h1>\n<p>Live-view links work for 15 minutes. Ask whoever shared it for a new one.</p>';
    return { status: 404, html: page('Live view link expired or unknown', main, false) };
  }
  // A machine that is not up (or a host that fails) shows no picture, rather than an error page.
  const screen = await provider.screen(toProviderMachine(machine)).catch(() => null);
  const name = escapeHtml(machine.name);
  const status = escapeHtml(machine.status);
  const picture = screen === null ? null : `data:${screen.contentType};base64,${screen.body.toString('base64')}`;
  const shown = picture === null ? '<p>No picture of the screen: the machine is not running, or has no display.</p>' : `<img src="${picture}" alt="Screen of ${name}, ${status}">`;
  const main = `<h1>${name} <span data-status="${status}">(${status})</span></h1>\n${shown}`;
  return { status: 200, html: page(`Live view: ${name}`, main, true) };
}
