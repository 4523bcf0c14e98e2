import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { CreateRunBody, RunSchema } from './runs.schemas.ts';
import { getRun, listRuns, runScreenshot, startManualRun } from './runs.service.ts';

const tags = ['runs'];

export const runsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/machines/:id/runs', {
    schema: {
      tags,
      summary: 'Run a command on a running machine (source manual); answers the run at once, pending: its outcome follows as run.succeeded or run.failed',
      params: IdParamsSchema,
      body: CreateRunBody,
      response: responses({ 201: RunSchema }),
    },
  }, async (request, reply) => {
    const input = { ...request.body, stopAfter: request.body.stopAfter ?? false };
    return reply.code(201).send(await startManualRun(deps, provider, accountIdOf(request), request.params.id, input));
  });

  app.get('/api/machines/:id/runs', {
    schema: { tags, summary: "A machine's runs, newest first", params: IdParamsSchema, querystring: ListQuerySchema, response: responses({ 200: pageSchema(RunSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    return toPage(await listRuns(deps, accountIdOf(request), request.params.id, limit + 1, request.query.cursor), limit);
  });

  app.get('/api/runs/:id', {
    schema: { tags, summary: 'One run', params: IdParamsSchema, response: responses({ 200: RunSchema }) },
  }, async (request) => getRun(deps, accountIdOf(request), request.params.id));

  app.get('/api/runs/:id/screenshot', {
    schema: { tags, summary: "The machine's screen as the run ended (image/png), where the machine has a display and still keeps it (two hours)", params: IdParamsSchema },
  }, async (request, reply) => {
    const png = await runScreenshot(deps, provider, accountIdOf(request), request.params.id);
    return reply.type('image/png').header('cache-control', 'private, max-age=3600').send(png);
  });
};
