import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ALL_EVENT_TYPES } from '../events/event-types.ts';
import { listEventRows } from '../events/events.repository.ts';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, pageSchema } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { getDelivery } from './deliveries.service.ts';
import { CountSchema, DeliveryWithLogSchema, EventSchema, EventsQuery, WindowBody } from './event-webhooks.schemas.ts';
import { getEvent, recoverFailed, replayMissing } from './recovery.service.ts';

/** Event history, the attempt log, recover and replay. */
export const historyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;

  app.get('/api/events', {
    schema: { tags: ['events'], summary: "The account's events, newest first (kept for RETENTION)", querystring: EventsQuery, response: responses({ 200: pageSchema(EventSchema) }) },
  }, async (request, reply) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const types = request.query.type === undefined ? ALL_EVENT_TYPES : [request.query.type];
    const rows = await listEventRows(deps.db, accountIdOf(request), types, limit + 1, request.query.cursor, request.query.machineId);
    const page = rows.slice(0, limit);
    const nextCursor = rows.length > limit ? page.at(-1)!.id : null;
    // The stored envelopes as they are, byte for byte: what was delivered.
    return reply.type('application/json; charset=utf-8').send(`{"data":[${page.map((row) => row.payload).join(',')}],"nextCursor":${JSON.stringify(nextCursor)}}` as never);
  });

  app.get('/api/events/:id', {
    schema: { tags: ['events'], summary: 'One event: the envelope exactly as delivered', params: IdParamsSchema, response: responses({ 200: EventSchema }) },
  }, async (request, reply) => reply.type('application/json; charset=utf-8').send((await getEvent(deps, accountIdOf(request), request.params.id)) as never));

  app.get('/api/event-webhooks/deliveries/:id', {
    schema: { tags: ['event-webhooks'], summary: 'One delivery with its attempt log', params: IdParamsSchema, response: responses({ 200: DeliveryWithLogSchema }) },
  }, async (request) => getDelivery(deps.db, accountIdOf(request), request.params.id));

  app.post('/api/event-webhooks/:id/recover', {
    schema: { tags: ['event-webhooks'], summary: 'Send again every failed delivery created in the window', params: IdParamsSchema, body: WindowBody, response: responses({ 202: CountSchema }) },
  }, async (request, reply) => reply.code(202).send(await recoverFailed(deps, accountIdOf(request), request.params.id, request.body)));

  app.post('/api/event-webhooks/:id/replay', {
    schema: { tags: ['event-webhooks'], summary: 'Deliver every event of the window that the endpoint missed', params: IdParamsSchema, body: WindowBody, response: responses({ 202: CountSchema }) },
  }, async (request, reply) => reply.code(202).send(await replayMissing(deps, accountIdOf(request), request.params.id, request.body)));
};
