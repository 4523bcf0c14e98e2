import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { ALL_EVENT_TYPES } from '../events/event-types.ts';
import { eventIdsInWindow, findEventRow } from '../events/events.repository.ts';
import { invalidRequest, notFound } from '../http/errors.ts';
import { idBoundAt } from '../shared/ids.ts';
import { eventsWithDelivery, insertMissingDeliveries, newDeliveryRow, reopenFailed } from './deliveries.repository.ts';
import { eventsOf, findEndpointRow, subscribes } from './endpoints.repository.ts';
import { feedJob } from './recovery.job.ts';

export interface Window {
  since: string;
  until?: string | undefined;
}

/** Rows claimed per transaction: each one short, so neither a request nor a delivery waits behind it. */
const CHUNK = 500;

/**
 * [since, until] in epoch ms; `until` defaults to now.
 * @throws AppError 400 when `until` is before `since`, or `since` is older than the retention period.
 */
function windowOf(deps: Deps, { since, until }: Window): { from: number; to: number } {
  const now = deps.clock.now();
  const from = Date.parse(since);
  const to = until === undefined ? now : Date.parse(until);
  if (Number.isNaN(from) || Number.isNaN(to)) throw invalidRequest('since and until must be ISO 8601 timestamps.');
  if (to < from) throw invalidRequest('until must not be before since.');
  const oldest = now - deps.config.retention.periodMs;
  if (from < oldest) throw invalidRequest(`since must be within the retention period (RETENTION): not before ${new Date(oldest).toISOString()}.`);
  return { from, to };
}

async function endpointOf(deps: Deps, accountId: string, endpointId: string) {
  const endpoint = await findEndpointRow(deps.db, accountId, endpointId);
  if (endpoint === undefined) throw notFound('The event webhook endpoint');
  return endpoint;
}

/**
 * `recover`: every failed delivery of the endpoint created in the
 * window starts a new attempt series. Claimed here in short transactions
 * (failed → pending), sent by the feeder job through the endpoint's lane.
 * @throws AppError 400 bad window, 404 unknown endpoint.
 */
export async function recoverFailed(deps: Deps, accountId: string, endpointId: string, window: Window): Promise<{ count: number }> {
  const { from, to } = windowOf(deps, window);
  await endpointOf(deps, accountId, endpointId);
  const fromId = idBoundAt('dlv', from);
  const toId = idBoundAt('dlv', to + 1);
  let count = 0;
  let after: string | undefined;
  for (;;) {
    const chunk = await inTransaction(deps.database, async (tx) => {
      const reopened = await reopenFailed(tx.db, endpointId, fromId, toId, after, CHUNK);
      if (reopened.count > 0) await deps.jobs.enqueue(tx, feedJob, [{ payload: { endpointId } }]);
      return reopened;
    });
    count += chunk.count;
    if (!chunk.more) return { count };
    after = chunk.last;
  }
}

/**
 * `replay`: every event of the window that the endpoint's filter
 * matches and that has no delivery to it gets one. The unique (event,
 * endpoint) index decides between concurrent replays: each delivery is
 * added once, and counted by the call that added it.
 * @throws AppError 400 bad window, 404 unknown endpoint.
 */
export async function replayMissing(deps: Deps, accountId: string, endpointId: string, window: Window): Promise<{ count: number }> {
  const { from, to } = windowOf(deps, window);
  const endpoint = await endpointOf(deps, accountId, endpointId);
  const subscribed = eventsOf(endpoint.events);
  // webhook.test is never replayed: only the catalogue's types.
  const types = ALL_EVENT_TYPES.filter((type) => subscribes(subscribed, type));
  const fromId = idBoundAt('evt', from);
  const toId = idBoundAt('evt', to + 1);
  let count = 0;
  for (const type of types) {
    let after: string | undefined;
    for (;;) {
      const ids = await eventIdsInWindow(deps.db, accountId, type, fromId, toId, after, CHUNK);
      if (ids.length === 0) break;
      count += await inTransaction(deps.database, async (tx) => {
        const have = await eventsWithDelivery(tx.db, endpointId, ids);
        const now = deps.clock.now();
        const rows = ids.filter((id) => !have.has(id)).map((id) => ({ ...newDeliveryRow(now, accountId, endpointId, { id, type }), next_attempt_at: null, unqueued: 1 }));
        const added = await insertMissingDeliveries(tx.db, rows);
        if (added > 0) await deps.jobs.enqueue(tx, feedJob, [{ payload: { endpointId } }]);
        return added;
      });
      if (ids.length < CHUNK) break;
      after = ids.at(-1);
    }
  }
  return { count };
}

/** @throws AppError 404 unknown event (or another account's, or a test event). */
export async function getEvent(deps: Deps, accountId: string, id: string): Promise<string> {
  const row = await findEventRow(deps.db, accountId, id);
  if (row === undefined || !(ALL_EVENT_TYPES as readonly string[]).includes(row.type)) throw notFound('The event');
  return row.payload;
}
