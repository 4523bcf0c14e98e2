import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { refuseBody } from '../http/validation.ts';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, NullableTimestamp, responses, Timestamp } from '../http/schemas.ts';
import { requireRecentAuthentication } from '../http/recent-authentication.ts';
import { originOf } from '../http/request-origin.ts';
import { createApiKey, listApiKeys, revokeApiKey } from './api-keys.service.ts';

const tags = ['api-keys'];

const CreateApiKeyBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 100 }) }, { additionalProperties: false });

const CreatedApiKeySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  key: Type.String({ description: 'The key itself: shown only in this response' }),
  createdAt: Timestamp,
});

const ApiKeySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'First 8 characters of the key' }),
  createdAt: Timestamp,
  lastUsedAt: NullableTimestamp,
});

export const apiKeysRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;

  app.post('/api/keys', {
    schema: {
      tags,
      summary: 'Create an API key (shown once)',
      description: 'From the dashboard, needs a recent authentication (a sign-in or POST /api/me/reauthenticate within 10 minutes).',
      body: CreateApiKeyBody,
      response: responses({ 201: CreatedApiKeySchema }),
    },
  }, async (request, reply) => {
    const now = deps.clock.now();
    requireRecentAuthentication(request, now);
    return reply.code(201).send(await createApiKey(deps.database, accountIdOf(request), request.body.name, now, originOf(request)));
  });

  app.get('/api/keys', {
    schema: { tags, summary: "The account's API keys", querystring: ListQuerySchema, response: responses({ 200: pageSchema(ApiKeySchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    return toPage(await listApiKeys(deps.db, accountIdOf(request), limit + 1, request.query.cursor), limit);
  });

  app.delete('/api/keys/:id', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Revoke an API key; it fails at once', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await revokeApiKey(deps, accountIdOf(request), request.params.id, originOf(request));
    return reply.code(204).send(null);
  });
};
