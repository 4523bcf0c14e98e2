import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { toMachineView } from './machines.repository.ts';
import { Type } from 'typebox';
import { DEFAULT_IMAGE_NAME } from '../config.ts';
import { CreateMachineBody, ImageSchema, ListMachinesQuery, MachineSchema, MachineWithTokenSchema, UpdateMachineBody } from './machines.schemas.ts';
import { changeMachine } from './network.service.ts';
import {
  createMachine,
  destroyMachine,
  getMachineRow,
  imageNames,
  listMachines,
  rotateMachineToken,
  startMachine,
  stopMachine,
} from './machines.service.ts';
import { pauseMachine, resumeMachine } from './pause.service.ts';

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

  app.get('/api/images', {
    schema: { tags, summary: 'The images a machine may be created from (POST /api/machines {image})', response: responses({ 200: Type.Object({ data: Type.Array(ImageSchema) }) }) },
  }, async () => ({ data: imageNames(deps.config.machines).map((name) => ({ name, default: name === DEFAULT_IMAGE_NAME })) }));

  app.get('/api/machines/:id', {
    schema: { tags, summary: 'One machine', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => toMachineView(await getMachineRow(deps, accountIdOf(request), request.params.id)));

  app.patch('/api/machines/:id', {
    schema: {
      tags,
      summary: "Change a machine's settings: autoStopMinutes (idle stop) and its network policy (applied at once where it runs, no restart); what is left out stays",
      description: '400 invalid_request for a bad value or policy entry (nothing changes); 404 for an unknown machine or one of another account; 409 invalid_state for a destroyed one; 502 provider_error when the host could not apply a network policy (the previous policy still holds, and nothing else changed).',
      params: IdParamsSchema,
      body: UpdateMachineBody,
      response: responses({ 200: MachineSchema }),
    },
  }, async (request) => changeMachine(deps, provider, accountIdOf(request), request.params.id, request.body));

  app.post('/api/machines/:id/start', {
    schema: { tags, summary: 'Boot a stopped machine (machine.started follows when it is up)', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => startMachine(deps, provider, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/stop', {
    schema: { tags, summary: 'Turn a machine off, keeping its state (machine.stopped, reason requested)', params: IdParamsSchema, response: responses({ 200: MachineSchema }) },
  }, async (request) => stopMachine(deps, provider, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/pause', {
    schema: {
      tags,
      summary: 'Freeze a running machine with its memory and processes (machine.paused); billed at the paused price until resumed',
      description: '409 invalid_state unless the machine is running; 502 provider_error when the host fails (nothing changes).',
      params: IdParamsSchema,
      response: responses({ 200: MachineSchema }),
    },
  }, async (request) => pauseMachine(deps, provider, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/resume', {
    schema: {
      tags,
      summary: 'Let a paused machine go on from where it was frozen (machine.resumed)',
      description: '409 invalid_state unless the machine is paused; 402 payment_required on an empty balance; 502 provider_error when the host fails (nothing changes).',
      params: IdParamsSchema,
      response: responses({ 200: MachineSchema }),
    },
  }, async (request) => resumeMachine(deps, provider, accountIdOf(request), request.params.id));

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
