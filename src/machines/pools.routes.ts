import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { CreatePoolBody, PoolSchema, UpdatePoolBody } from './machines.schemas.ts';
import { createPool, deletePool, getPool, listPools, resizePool } from './pools.service.ts';

const tags = ['pools'];

export const poolsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/pools', {
    schema: { tags, summary: 'Create a warm pool that keeps `count` machines booted', body: CreatePoolBody, response: responses({ 201: PoolSchema }) },
  }, async (request, reply) => reply.code(201).send(await createPool(deps, provider, accountIdOf(request), request.body)));

  app.get('/api/pools', {
    schema: { tags, summary: "The account's warm pools", querystring: ListQuerySchema, response: responses({ 200: pageSchema(PoolSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    return toPage(await listPools(deps, accountIdOf(request), limit + 1, request.query.cursor), limit);
  });

  app.get('/api/pools/:id', {
    schema: { tags, summary: 'One warm pool', params: IdParamsSchema, response: responses({ 200: PoolSchema }) },
  }, async (request) => getPool(deps, accountIdOf(request), request.params.id));

  app.patch('/api/pools/:id', {
    schema: { tags, summary: 'Change how many machines the pool keeps warm', params: IdParamsSchema, body: UpdatePoolBody, response: responses({ 200: PoolSchema }) },
  }, async (request) => resizePool(deps, provider, accountIdOf(request), request.params.id, request.body.count));

  app.delete('/api/pools/:id', {
    schema: { tags, summary: 'Delete the pool and destroy its unclaimed machines', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await deletePool(deps, provider, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });
};
