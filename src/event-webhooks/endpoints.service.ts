import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { lockAccount } from '../db/locks.ts';
import { inTransaction } from '../db/transaction.ts';
import { ALL_EVENT_TYPES, isEventType } from '../events/event-types.ts';
import { conflict, invalidRequest, notFound } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { generateSigningSecret } from '../shared/secrets.ts';
import { deleteEndpointRow, findEndpointRow, insertEndpoint, listEndpointRows, toEndpoint, updateEndpointRow, countEndpoints, type Endpoint } from './endpoints.repository.ts';
import { announce } from '../db/signals.ts';
import { recordSecurityEvent, type RequestOrigin } from '../security-log/security-log.ts';
import { ALLOW_PRIVATE_TARGETS_HINT, checkHostLiteral, RefusedTargetError } from './targets.ts';

export const MAX_ENDPOINTS_PER_ACCOUNT = 10;
export const URL_MAX_LENGTH = 2048;

export interface NewEndpoint {
  url: string;
  events?: string[] | undefined;
  description?: string | undefined;
}

export interface EndpointChanges {
  url?: string | undefined;
  events?: string[] | undefined;
  description?: string | undefined;
  enabled?: boolean | undefined;
}

const endpointNotFound = () => notFound('The event webhook endpoint');

/** @throws AppError 400 unless the URL is absolute https, without credentials, and (unless allowed) not a private address. */
function validUrl(deps: Deps, value: string): string {
  // The URL parser would quietly drop these (tabs and newlines even inside), so what is stored would not be what is used.
  if (/[\u0000-\u0020\u007f]/.test(value)) throw invalidRequest('url must not contain spaces or control characters.');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidRequest('url must be an absolute https:// URL.');
  }
  if (url.protocol !== 'https:') throw invalidRequest('url must use https.');
  if (value.length > URL_MAX_LENGTH) throw invalidRequest(`url must be at most ${URL_MAX_LENGTH} characters.`);
  if (url.username !== '' || url.password !== '') throw invalidRequest('url must not contain credentials.');
  if (!deps.config.webhook.allowPrivateTargets) {
    try {
      checkHostLiteral(url.hostname);
    } catch (error) {
      if (error instanceof RefusedTargetError) throw invalidRequest(`url is not reachable from the internet: ${error.message}; ${ALLOW_PRIVATE_TARGETS_HINT}.`);
      throw error;
    }
  }
  return value;
}

/** @throws AppError 400 for an empty list or an unknown type. */
function validEvents(events: string[]): string[] {
  if (events.length === 0) throw invalidRequest('events must name at least one event type, or "*".');
  const unknown = events.filter((type) => type !== '*' && !isEventType(type));
  if (unknown.length > 0) throw invalidRequest(`events has unknown types: ${unknown.join(', ')}. Known: ${ALL_EVENT_TYPES.join(', ')}, or "*".`);
  return [...new Set(events)];
}

/**
 * Registers an endpoint; its signing secret is in this answer only.
 * @throws AppError 400 invalid input, 409 limit_reached on the 11th endpoint.
 */
export async function createEndpoint(deps: Deps, accountId: string, input: NewEndpoint): Promise<Endpoint & { secret: string }> {
  const url = validUrl(deps, input.url);
  const events = validEvents(input.events ?? ['*']);
  const now = deps.clock.now();
  const secret = generateSigningSecret();
  const row = {
    id: newId('ep', now),
    account_id: accountId,
    url,
    events: JSON.stringify(events),
    description: input.description ?? '',
    enabled: 1,
    secret,
    created_at: now,
    updated_at: now,
    disabled_reason: null,
    disabled_at: null,
    failing_since: null,
    warned_at: null,
  };
  await inTransaction(deps.database, async (tx) => {
    await lockAccount(tx.db, accountId);
    if ((await countEndpoints(tx.db, accountId)) >= MAX_ENDPOINTS_PER_ACCOUNT) {
      throw conflict('limit_reached', `An account can register at most ${MAX_ENDPOINTS_PER_ACCOUNT} event webhook endpoints.`);
    }
    await insertEndpoint(tx.db, row);
    await deps.jobs.openLane(tx, row.id, { paused: false });
  });
  return { ...toEndpoint(row), secret };
}

export async function listEndpoints(db: Kysely<DB>, accountId: string, limit: number, cursor: string | undefined): Promise<Endpoint[]> {
  return (await listEndpointRows(db, accountId, limit, cursor)).map(toEndpoint);
}

/** @throws AppError 404 for unknown ids and other accounts' ids alike. */
export async function getEndpoint(db: Kysely<DB>, accountId: string, id: string): Promise<Endpoint> {
  const row = await findEndpointRow(db, accountId, id);
  if (row === undefined) throw endpointNotFound();
  return toEndpoint(row);
}

/**
 * Changes url, events, description or enabled. Pausing holds pending deliveries; resuming releases them at once.
 * @throws AppError 400 invalid input, 404 unknown endpoint.
 */
export async function updateEndpoint(deps: Deps, accountId: string, id: string, changes: EndpointChanges): Promise<Endpoint> {
  const set = {
    ...(changes.url !== undefined ? { url: validUrl(deps, changes.url) } : {}),
    ...(changes.events !== undefined ? { events: JSON.stringify(validEvents(changes.events)) } : {}),
    ...(changes.description !== undefined ? { description: changes.description } : {}),
    // Enabling or pausing by hand clears an auto-disable's reason and restarts the failing clock.
    ...(changes.enabled !== undefined ? { enabled: changes.enabled ? 1 : 0, disabled_reason: null, disabled_at: null, failing_since: null, warned_at: null } : {}),
    updated_at: deps.clock.now(),
  };
  const row = await inTransaction(deps.database, async (tx) => {
    const updated = await updateEndpointRow(tx.db, accountId, id, set);
    if (updated === undefined) return undefined;
    // Its lane holds its deliveries while it is paused, and lets them go on the moment it is resumed.
    if (changes.enabled === false) await deps.jobs.pauseLane(tx, id);
    if (changes.enabled === true) await deps.jobs.resumeLane(tx, id);
    await announce(deps.signals, tx, `endpoint:${id}`);
    return updated;
  });
  if (row === undefined) throw endpointNotFound();
  return toEndpoint(row);
}

/**
 * A new signing secret, in this answer only; the old one signs nothing more.
 * @throws AppError 404 unknown endpoint.
 */
export async function rotateSecret(deps: Deps, accountId: string, id: string, origin: RequestOrigin | null = null): Promise<{ secret: string }> {
  const secret = generateSigningSecret();
  const now = deps.clock.now();
  const row = await inTransaction(deps.database, async (tx) => {
    const updated = await updateEndpointRow(tx.db, accountId, id, { secret, updated_at: now });
    if (updated !== undefined) {
      await announce(deps.signals, tx, `endpoint:${id}`);
      await recordSecurityEvent(tx.db, { accountId, type: 'webhook_secret_rotated', at: now, origin, detail: { endpointId: id, url: updated.url } });
    }
    return updated;
  });
  if (row === undefined) throw endpointNotFound();
  return { secret };
}

/**
 * Removes the endpoint and cancels its pending deliveries.
 * @throws AppError 404 unknown endpoint.
 */
export async function deleteEndpoint(deps: Deps, accountId: string, id: string): Promise<void> {
  const deleted = await inTransaction(deps.database, async (tx) => {
    // The endpoint first, then (with it) its deliveries, then its lane's jobs: the order settlements lock in (lockEndpoints).
    const removed = await deleteEndpointRow(tx.db, accountId, id);
    if (!removed) return false;
    await deps.jobs.closeLane(tx, id);
    await announce(deps.signals, tx, `endpoint:${id}`);
    return true;
  });
  if (!deleted) throw endpointNotFound();
}
