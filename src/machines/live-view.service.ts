import { MINUTE, toIso } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { notFound } from '../http/errors.ts';
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

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The page behind a live-view link: the provider's picture of the screen,
 * refreshed every few seconds.
 * @throws AppError 404 for an unknown or expired link, or a destroyed machine.
 */
export async function renderLiveView(deps: Deps, provider: MachineProvider, token: string): Promise<string> {
  const machine = await findLiveViewMachine(deps.db, hashToken(token), deps.clock.now());
  if (machine === undefined) throw notFound('The live view');
  const screen = provider.screen(toProviderMachine(machine));
  const name = escapeHtml(machine.name);
  const picture = `data:${screen.contentType};base64,${Buffer.from(screen.body, 'utf8').toString('base64')}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="5">
<meta name="robots" content="noindex">
<title>Live view: ${name}</title>
<style>body{margin:0;min-height:100vh;display:grid;place-items:center;background:#0d1117;color:#f0f6fc;font-family:sans-serif}img{max-width:100vw;height:auto}</style>
</head>
<body>
<main>
<h1 style="font-size:1rem;font-weight:normal;text-align:center">${name} <span data-status="${escapeHtml(machine.status)}">(${escapeHtml(machine.status)})</span></h1>
<img src="${picture}" alt="Screen of ${name}, ${escapeHtml(machine.status)}">
</main>
</body>
</html>
`;
}
