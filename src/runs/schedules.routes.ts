import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { CreateScheduleBody, ScheduleSchema, TriggerListQuery } from './runs.schemas.ts';
import { createSchedule, deleteSchedule, getSchedule, listSchedules } from './schedules.service.ts';

const tags = ['schedules'];

export const schedulesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;

  app.post('/api/schedules', {
    schema: {
      tags,
      summary: 'Run a command on a machine on a five-field cron schedule (UTC); a stopped machine is booted for it',
      body: CreateScheduleBody,
      response: responses({ 201: ScheduleSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createSchedule(deps, accountIdOf(request), request.body)));

  app.get('/api/schedules', {
    schema: { tags, summary: "The account's schedules", querystring: TriggerListQuery, response: responses({ 200: pageSchema(ScheduleSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const rows = await listSchedules(deps, accountIdOf(request), { limit: limit + 1, cursor: request.query.cursor, machineId: request.query.machineId });
    return toPage(rows, limit);
  });

  app.get('/api/schedules/:id', {
    schema: { tags, summary: 'One schedule', params: IdParamsSchema, response: responses({ 200: ScheduleSchema }) },
  }, async (request) => getSchedule(deps, accountIdOf(request), request.params.id));

  app.delete('/api/schedules/:id', {
    schema: { tags, summary: 'Delete a schedule', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await deleteSchedule(deps, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });
};
