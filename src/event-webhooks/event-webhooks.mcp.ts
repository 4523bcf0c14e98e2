import { Type } from 'typebox';
import { toPage } from '../http/pagination.ts';
import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool, NoInput } from '../mcp/tools.ts';
import { ALL_EVENT_TYPES as EVENT_TYPES } from '../events/event-types.ts';
import { listEventRows } from '../events/events.repository.ts';
import { DEFAULT_PAGE_SIZE } from '../http/pagination.ts';
import { IdParamsSchema } from '../http/schemas.ts';
import { listDeliveries, sendTestEvent, type TestSending } from './deliveries.service.ts';
import { recoverFailed, replayMissing } from './recovery.service.ts';
import { createEndpoint, deleteEndpoint, listEndpoints, MAX_ENDPOINTS_PER_ACCOUNT } from './endpoints.service.ts';
import { CreateEndpointBody, DeliveriesQuery, EventsQuery, WindowBody } from './event-webhooks.schemas.ts';

// Each input is the HTTP route's schema, or built from its fields (event-webhooks.schemas.ts): a limit is written once.
const strict = { additionalProperties: false } as const;
const EndpointId = { ...IdParamsSchema.properties.id, description: 'Endpoint id (ep_…)' };
const EndpointInput = Type.Object({ id: EndpointId }, strict);
const WindowInput = Type.Object({ id: EndpointId, ...WindowBody.properties }, strict);
const { endpoint, status, eventType, limit, cursor } = DeliveriesQuery.properties;
const DeliveriesInput = Type.Object({ endpoint, status, eventType, limit, cursor }, strict);

/** The platform MCP tools for event webhooks, each the HTTP operation with the same JSON. */
export const eventWebhookTools = (testSending: TestSending): PlatformToolRegistrar => (server, { deps, accountId }) => {
  const logger = deps.logger;

  defineTool(server, logger, 'event_webhooks_list', {
    description: "Lists the account's event webhook endpoints (at most 10), as {data, nextCursor}. Secrets are never listed.",
    input: NoInput,
    annotations: { readOnlyHint: true },
  }, async () => toPage(await listEndpoints(deps.db, accountId, MAX_ENDPOINTS_PER_ACCOUNT + 1, undefined), MAX_ENDPOINTS_PER_ACCOUNT));

  defineTool(server, logger, 'event_webhook_create', {
    description:
      'Registers an HTTPS endpoint that receives signed JSON events. The answer carries `secret` (whsec_…), shown only ' +
      'this once: keep it to verify the Service-Signature header.',
    input: CreateEndpointBody,
  }, (input) => createEndpoint(deps, accountId, input));

  defineTool(server, logger, 'event_webhook_test', {
    description: 'Sends a webhook.test event to the endpoint now and reports {ok, status, error}.',
    input: EndpointInput,
  }, ({ id }) => sendTestEvent(deps, testSending, accountId, id));

  defineTool(server, logger, 'events_list', {
    description: "Lists the account's events newest first, as {data, nextCursor}: each the envelope exactly as delivered. Kept for the retention period. `machineId` keeps one machine's events (its machine.* events and its runs' run.* events).",
    input: EventsQuery,
    annotations: { readOnlyHint: true },
  }, async ({ type, machineId, limit = DEFAULT_PAGE_SIZE, cursor }) => {
    const rows = await listEventRows(deps.db, accountId, type === undefined ? EVENT_TYPES : [type], limit + 1, cursor, machineId);
    return toPage(rows.map((row) => ({ ...(JSON.parse(row.payload) as { id: string }) })), limit);
  });

  defineTool(server, logger, 'event_webhook_deliveries_list', {
    description: 'Lists deliveries newest first, as {data, nextCursor}, optionally of one endpoint, one status or one event type.',
    input: DeliveriesInput,
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
    input: EndpointInput,
    annotations: { destructiveHint: true },
  }, async ({ id }) => {
    await deleteEndpoint(deps, accountId, id);
    return { id, deleted: true };
  });
};
