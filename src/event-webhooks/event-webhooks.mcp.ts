import * as z from 'zod';
import { ALL_EVENT_TYPES } from '../events/event-types.ts';
import { toPage } from '../http/pagination.ts';
import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool } from '../mcp/tools.ts';
import { sendTestEvent, type TestSending } from './deliveries.service.ts';
import { createEndpoint, deleteEndpoint, listEndpoints, MAX_ENDPOINTS_PER_ACCOUNT, URL_MAX_LENGTH } from './endpoints.service.ts';

const EndpointId = z.strictObject({ id: z.string().min(1).max(100).describe('Endpoint id (ep_…)') });

/** Spec 4.3: the platform MCP tools for event webhooks, each the HTTP operation with the same JSON. */
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

  defineTool(server, logger, 'event_webhook_delete', {
    description: 'Removes the endpoint; its pending deliveries are cancelled.',
    input: EndpointId,
    annotations: { destructiveHint: true },
  }, async ({ id }) => {
    await deleteEndpoint(deps, accountId, id);
    return { id, deleted: true };
  });
};
