import * as z from 'zod';
import { ALL_EVENT_TYPES } from '../events/event-types.ts';
import { toPage } from '../http/pagination.ts';
import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool } from '../mcp/tools.ts';
import { ALL_EVENT_TYPES as EVENT_TYPES } from '../events/event-types.ts';
import { listEventRows } from '../events/events.repository.ts';
import { DEFAULT_PAGE_SIZE } from '../http/pagination.ts';
import { idPattern } from '../shared/ids.ts';
import { listDeliveries, sendTestEvent, type TestSending } from './deliveries.service.ts';
import { recoverFailed, replayMissing } from './recovery.service.ts';
import { createEndpoint, deleteEndpoint, listEndpoints, MAX_ENDPOINTS_PER_ACCOUNT, URL_MAX_LENGTH } from './endpoints.service.ts';

const Limit = z.number().int().min(1).max(100).optional().describe('Page size, 1 to 100 (default 50)');
const Cursor = z.string().regex(/^[a-z]+_[0-9a-z]{26}$/).optional().describe('nextCursor of the previous page');
const Timestamp = z.iso.datetime();
const WindowInput = z.strictObject({
  id: z.string().min(1).max(100).describe('Endpoint id (ep_…)'),
  since: Timestamp.describe('Start of the window (ISO 8601), within the retention period'),
  until: Timestamp.optional().describe('End of the window (ISO 8601); default now'),
});

const EndpointId = z.strictObject({ id: z.string().min(1).max(100).describe('Endpoint id (ep_…)') });

/** The platform MCP tools for event webhooks, each the HTTP operation with the same JSON. */
export const eventWebhookTools = (testSending: TestSending): PlatformToolRegistrar => (server, { deps, accountId }) => {
  const logger = deps.logger;

  defineTool(server, logger, 'event_webhooks_list', {
    description: "Lists the account's event webhook endpoints (at most 10), as {data, nextCursor}. Secrets are never listed.",
    input: z.strictObject({}),
    annotations: { readOnlyHint: true },
  }, async () => toPage(await listEndpoints(deps.db, accountId, MAX_ENDPOINTS_PER_ACCOUNT + 1, undefined), MAX_ENDPOINTS_PER_ACCOUNT));

  defineTool(server, logger, 'event_webhook_create', {
    description:
      'Registers an HTTPS endpoint that receives signed JSON events. The answer carries `secret` (whsec_…), shown only ' +
      'this once: keep it to verify the Service-Signature header.',
    input: z.strictObject({
      url: z.string().min(1).max(URL_MAX_LENGTH).describe('Absolute https:// URL'),
      events: z.array(z.enum(['*', ...ALL_EVENT_TYPES])).min(1).optional().describe('Event types to receive; default ["*"] (all)'),
      description: z.string().max(500).optional(),
    }),
  }, (input) => createEndpoint(deps, accountId, input));

  defineTool(server, logger, 'event_webhook_test', {
    description: 'Sends a webhook.test event to the endpoint now and reports {ok, status, error}.',
    input: EndpointId,
  }, ({ id }) => sendTestEvent(deps, testSending, accountId, id));

  defineTool(server, logger, 'events_list', {
    description: "Lists the account's events newest first, as {data, nextCursor}: each the envelope exactly as delivered. Kept for the retention period. `machineId` keeps one machine's events (its machine.* events and its runs' run.* events).",
    input: z.strictObject({
      type: z.enum(EVENT_TYPES).optional().describe('Only events of this type'),
      machineId: z.string().regex(new RegExp(idPattern('mch'))).optional().describe('Only events about this machine (mch_…)'),
      limit: Limit,
      cursor: Cursor,
    }),
    annotations: { readOnlyHint: true },
  }, async ({ type, machineId, limit = DEFAULT_PAGE_SIZE, cursor }) => {
    const rows = await listEventRows(deps.db, accountId, type === undefined ? EVENT_TYPES : [type], limit + 1, cursor, machineId);
    return toPage(rows.map((row) => ({ ...(JSON.parse(row.payload) as { id: string }) })), limit);
  });

  defineTool(server, logger, 'event_webhook_deliveries_list', {
    description: 'Lists deliveries newest first, as {data, nextCursor}, optionally of one endpoint, one status or one event type.',
    input: z.strictObject({
      endpoint: z.string().min(1).max(100).optional().describe('Only this endpoint (ep_…)'),
      status: z.enum(['pending', 'delivered', 'failed']).optional(),
      eventType: z.string().min(1).max(100).optional(),
      limit: Limit,
      cursor: Cursor,
    }),
    annotations: { readOnlyHint: true },
  }, async ({ endpoint, status, eventType, limit = DEFAULT_PAGE_SIZE, cursor }) =>
    toPage(await listDeliveries(deps.db, accountId, { endpointId: endpoint, status, eventType }, limit + 1, cursor), limit));

  defineTool(server, logger, 'event_webhook_recover', {
    description: 'Sends again every failed delivery of the endpoint created in the window [since, until]; answers {count}. The sending happens in the background, paced by the endpoint.',
    input: WindowInput,
  }, ({ id, since, until }) => recoverFailed(deps, accountId, id, { since, until }));

  defineTool(server, logger, 'event_webhook_replay', {
    description: 'Delivers every event of the window [since, until] that the endpoint subscribes to and never received (paused, disabled or created later); answers {count}, the deliveries this call added.',
    input: WindowInput,
  }, ({ id, since, until }) => replayMissing(deps, accountId, id, { since, until }));

  defineTool(server, logger, 'event_webhook_delete', {
    description: 'Removes the endpoint; its pending deliveries are cancelled.',
    input: EndpointId,
    annotations: { destructiveHint: true },
  }, async ({ id }) => {
    await deleteEndpoint(deps, accountId, id);
    return { id, deleted: true };
  });
};
