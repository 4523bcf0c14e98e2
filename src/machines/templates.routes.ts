import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { forkMachine } from './forks.service.ts';
import { MachineWithTokenSchema } from './machines.schemas.ts';
import { CreateTemplateBody, ForkBody, TemplateSchema } from './templates.schemas.ts';
import { MAX_TEMPLATES_PER_ACCOUNT, createTemplate, deleteTemplate, getTemplate, listTemplates } from './templates.service.ts';

/** Templates (a machine's disk saved for new machines) and forks (new machines from a machine's disk at once): issue 41. */
export const templatesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/templates', {
    schema: {
      tags: ['templates'],
      summary: 'Save a machine’s disk as a template of the account',
      description: `The machine may be running (frozen for the copy, then going on), paused or stopped. At most ${MAX_TEMPLATES_PER_ACCOUNT} per account (409 limit_reached); another account's machine is 404; 409 not_supported where the provider keeps no disks.`,
      body: CreateTemplateBody,
      response: responses({ 201: TemplateSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createTemplate(deps, provider, accountIdOf(request), request.body)));

  app.get('/api/templates', {
    schema: { tags: ['templates'], summary: "The account's templates, newest first", querystring: ListQuerySchema, response: responses({ 200: pageSchema(TemplateSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    return toPage(await listTemplates(deps, accountIdOf(request), limit + 1, request.query.cursor), limit);
  });

  app.get('/api/templates/:id', {
    schema: { tags: ['templates'], summary: 'One template', params: IdParamsSchema, response: responses({ 200: TemplateSchema }) },
  }, async (request) => getTemplate(deps, accountIdOf(request), request.params.id));

  app.delete('/api/templates/:id', {
    schema: {
      tags: ['templates'],
      summary: 'Delete a template and its disk; machines made from it keep their files',
      description: '409 template_in_use while a warm pool makes its machines from it.',
      params: IdParamsSchema,
      response: responses({ 204: Type.Null() }),
    },
  }, async (request, reply) => {
    await deleteTemplate(deps, provider, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });

  app.post('/api/machines/:id/fork', {
    schema: {
      tags: ['machines'],
      summary: 'Make new machines from a machine’s disk at once (machine.created follows for each)',
      description: 'The machine may be running (frozen for the copy, then going on), paused or stopped. Each new machine takes its size, labels, screen, image and environment; the machine tokens are in this response only. A count outside 1–10 is 400 and makes nothing.',
      params: IdParamsSchema,
      body: ForkBody,
      response: responses({ 201: Type.Object({ data: Type.Array(MachineWithTokenSchema) }) }),
    },
  }, async (request, reply) => reply.code(201).send({ data: await forkMachine(deps, provider, accountIdOf(request), request.params.id, request.body) }));
};
