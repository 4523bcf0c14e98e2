import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import {
  createInboundWebhook,
  deleteInboundWebhook,
  getInboundWebhook,
  INBOUND_WEBHOOK_PATH,
  listInboundWebhooks,
  receiveInboundWebhook,
} from './inbound-webhooks.service.ts';
import { CreatedInboundWebhookSchema, CreateInboundWebhookBody, InboundWebhookSchema, RunSchema, TriggerListQuery } from './runs.schemas.ts';

const tags = ['inbound-webhooks'];

export const inboundWebhooksRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;

  app.post('/api/inbound-webhooks', {
    schema: {
      tags,
      summary: 'Create a URL that starts a run when POSTed to, signed; the URL and secret are in this response only',
      body: CreateInboundWebhookBody,
      response: responses({ 201: CreatedInboundWebhookSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createInboundWebhook(deps, accountIdOf(request), request.body)));

  app.get('/api/inbound-webhooks', {
    schema: { tags, summary: "The account's inbound webhooks", querystring: TriggerListQuery, response: responses({ 200: pageSchema(InboundWebhookSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const rows = await listInboundWebhooks(deps, accountIdOf(request), { limit: limit + 1, cursor: request.query.cursor, machineId: request.query.machineId });
    return toPage(rows, limit);
  });

  app.get('/api/inbound-webhooks/:id', {
    schema: { tags, summary: 'One inbound webhook', params: IdParamsSchema, response: responses({ 200: InboundWebhookSchema }) },
  }, async (request) => getInboundWebhook(deps, accountIdOf(request), request.params.id));

  app.delete('/api/inbound-webhooks/:id', {
    schema: { tags, summary: 'Delete an inbound webhook; its URL stops working', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await deleteInboundWebhook(deps, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });

  await app.register(inboundWebhookReceiver);
};

/**
 * The receiving end: no credential but the signature, computed over the raw
 * body, so this plugin (and only it) reads every body as bytes, whatever its type.
 */
const inboundWebhookReceiver: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.post(`${INBOUND_WEBHOOK_PATH}/:token`, {
    config: { auth: 'none' },
    schema: {
      tags,
      summary:
        'Queue the inbound webhook’s run (202 at once, pending); signed with Service-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">. ' +
        'The same signed request again is 409 replayed.',
      params: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
      security: [],
      response: responses({ 202: RunSchema }),
    },
  }, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const signature = request.headers['service-signature'];
    const run = await receiveInboundWebhook(deps, provider, request.params.token, body, Array.isArray(signature) ? signature[0] : signature);
    return reply.code(202).send(run);
  });
};
