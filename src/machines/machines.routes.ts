import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { toMachineView } from './machines.repository.ts';
import { CreateMachineBody, ListMachinesQuery, MachineSchema, MachineWithTokenSchema } from './machines.schemas.ts';
import {
  createMachine,
  destroyMachine,
  getMachineRow,
  listMachines,
  rotateMachineToken,
  startMachine,
  stopMachine,
} from './machines.service.ts';

const tags = ['machines'];

export const machinesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/machines', {
    schema: {
      tags,
      summary: 'Create a machine (or claim one from a warm pool); the machine token is in this response only',
      body: CreateMachineBody,
      response: responses({ 201: MachineWithTokenSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createMachine(deps, provider, accountIdOf(request), request.body)));

  app.get('/api/machines', {
    schema: { tags, summary: "The account's machines, newest first", querystring: ListMachinesQuery, response: responses({ 200: pageSchema(MachineSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const rows = await listMachines(deps, accountIdOf(request), { limit: limit + 1, cursor: request.query.cursor, status: request.query.status });
    return toPage(rows, limit);
  });

  app.get('/api/machines/:id', {
    schema: { tags, summary: 'One machine', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => toMachineView(await getMachineRow(deps, accountIdOf(request), request.params.id)));

  app.post('/api/machines/:id/start', {
    schema: { tags, summary: 'Boot a stopped machine (machine.started follows when it is up)', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => startMachine(deps, provider, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/stop', {
    schema: { tags, summary: 'Turn a machine off, keeping its state (machine.stopped, reason requested)', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => stopMachine(deps, provider, accountIdOf(request), request.params.id));

  app.delete('/api/machines/:id', {
    schema: { tags, summary: 'Destroy a machine (machine.destroyed); its record stays, with status destroyed', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => destroyMachine(deps, provider, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/mcp-token', {
    schema: {
      tags,
      summary: 'Issue a new machine token; the previous one stops working at once',
      params: IdParamsSchema,
      response: responses({ 200: MachineWithTokenSchema }),
    },
  }, async (request) => rotateMachineToken(deps, accountIdOf(request), request.params.id));
};
