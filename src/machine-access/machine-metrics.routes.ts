import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { responses, Timestamp } from '../http/schemas.ts';
import { machineMetrics } from './machine-metrics.service.ts';

const strict = { additionalProperties: false } as const;
const bytes = (description: string) => Type.Integer({ minimum: 0, description });

export const MetricSampleSchema = Type.Object({
  at: Timestamp,
  cpuPercent: Type.Number({ minimum: 0, maximum: 100, description: "Of the machine's CPUs (its size's) over the 5 s before `at`: 100 when all of them were busy" }),
  memoryBytes: bytes('Memory in use, as `docker stats` counts it: less the file cache the machine could drop'),
  memoryLimitBytes: bytes("The machine's memory (its size's)"),
  diskBytes: bytes("Bytes of the machine's disk in use"),
  diskLimitBytes: bytes("The machine's disk: its size's where the engine enforces it, else the filesystem's it is on"),
  pids: Type.Integer({ minimum: 0, description: 'Processes (and threads) running' }),
  rxBytes: bytes('Bytes received on its network since the machine started (a counter: the rate is the difference between samples)'),
  txBytes: bytes('Bytes sent on its network since the machine started'),
});

/** A machine's usage over the last hour, for its owner (API key or session). */
export const machineMetricsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.get('/api/machines/:id/metrics', {
    schema: {
      tags: ['machines'],
      summary: "The machine's use of CPU, memory, disk, processes and network: a sample every 5 s over the last hour, oldest first (empty while it is not running)",
      params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) }, strict),
      querystring: Type.Object({ since: Type.Optional(Type.String({ format: 'date-time', description: 'Only samples taken after this time (ISO 8601); pass the last `at` you have to read on' })) }, strict),
      response: responses({ 200: Type.Object({ data: Type.Array(MetricSampleSchema) }) }),
    },
  }, async (request) => ({ data: await machineMetrics(deps, provider, accountIdOf(request), request.params.id, request.query.since) }));
};
