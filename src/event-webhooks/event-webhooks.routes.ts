import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { refuseBody } from '../http/validation.ts';
import { listDeliveries, retryDelivery, sendTestEvent, type TestSending } from './deliveries.service.ts';
import { originOf } from '../http/request-origin.ts';
import { createEndpoint, deleteEndpoint, getEndpoint, listEndpoints, rotateSecret, updateEndpoint } from './endpoints.service.ts';
import {
  CreatedEndpointSchema,
  CreateEndpointBody,
  DeliveriesQuery,
  DeliverySchema,
  EndpointSchema,
  EVENT_TYPE_CATALOG,
  EventTypesSchema,
  SecretSchema,
  TestResultSchema,
  UpdateEndpointBody,
} from './event-webhooks.schemas.ts';

const tags = ['event-webhooks'];

export const eventWebhooksRoutes: FastifyPluginAsyncTypebox<{ testSending: TestSending }> = async (app, { testSending }) => {
  const { deps } = app;

  app.get('/api/event-webhooks', {
    schema: { tags, summary: "The account's endpoints", querystring: ListQuerySchema, response: responses({ 200: pageSchema(EndpointSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    return toPage(await listEndpoints(deps.db, accountIdOf(request), limit + 1, request.query.cursor), limit);
  });

  app.post('/api/event-webhooks', {
    schema: { tags, summary: 'Register an endpoint; the signing secret is shown once', body: CreateEndpointBody, response: responses({ 201: CreatedEndpointSchema }) },
  }, async (request, reply) => reply.code(201).send(await createEndpoint(deps, accountIdOf(request), request.body)));

  app.get('/api/event-webhooks/event-types', {
    schema: { tags, summary: 'Every event type, with what causes it', response: responses({ 200: EventTypesSchema }) },
  }, async () => ({ data: EVENT_TYPE_CATALOG }));

  app.get('/api/event-webhooks/deliveries', {
    schema: { tags, summary: 'Recent deliveries, newest first', querystring: DeliveriesQuery, response: responses({ 200: pageSchema(DeliverySchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const { endpoint, status, eventType, event } = request.query;
    const rows = await listDeliveries(deps.db, accountIdOf(request), { endpointId: endpoint, status, eventType, eventId: event }, limit + 1, request.query.cursor);
    return toPage(rows, limit);
  });

  app.post('/api/event-webhooks/deliveries/:id/retry', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Send a finished delivery again (new attempt series, same ids)', params: IdParamsSchema, response: responses({ 202: DeliverySchema }) },
  }, async (request, reply) => reply.code(202).send(await retryDelivery(deps, accountIdOf(request), request.params.id)));

  app.get('/api/event-webhooks/:id', {
    schema: { tags, summary: 'One endpoint', params: IdParamsSchema, response: responses({ 200: EndpointSchema }) },
  }, async (request) => getEndpoint(deps.db, accountIdOf(request), request.params.id));

  app.patch('/api/event-webhooks/:id', {
    schema: { tags, summary: 'Change an endpoint; enabled=false pauses it', params: IdParamsSchema, body: UpdateEndpointBody, response: responses({ 200: EndpointSchema }) },
  }, async (request) => updateEndpoint(deps, accountIdOf(request), request.params.id, request.body));

  app.post('/api/event-webhooks/:id/rotate-secret', {
    preValidation: refuseBody,
    schema: { tags, summary: 'New signing secret, shown once; the old one stops working', params: IdParamsSchema, response: responses({ 200: SecretSchema }) },
  }, async (request) => rotateSecret(deps, accountIdOf(request), request.params.id, originOf(request)));

  app.post('/api/event-webhooks/:id/test', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Send a webhook.test event now and report the outcome', params: IdParamsSchema, response: responses({ 200: TestResultSchema }) },
  }, async (request) => sendTestEvent(deps, testSending, accountIdOf(request), request.params.id));

  app.delete('/api/event-webhooks/:id', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Remove an endpoint; its pending deliveries are cancelled', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await deleteEndpoint(deps, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });
};
