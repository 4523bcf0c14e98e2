import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { AppError } from '../http/errors.ts';
import { responses } from '../http/schemas.ts';

const tags = ['operations'];

/** Probes and metrics: served by every role, so workers can be probed and scraped too. */
export const opsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/healthz', {
    config: { auth: 'none' },
    schema: { tags, summary: 'The process is up', response: responses({ 200: Type.Object({ ok: Type.Literal(true) }) }) },
  }, async () => ({ ok: true as const }));

  app.get('/readyz', {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'The database answers',
      description: 'Ready when the database answers. `warnings` says what an operator must know about how machines run here (a disk limit the engine cannot enforce); absent when there is nothing to say.',
      response: responses({ 200: Type.Object({ ok: Type.Literal(true), warnings: Type.Optional(Type.Array(Type.String())) }) }),
    },
  }, async () => {
    try {
      await sql`select 1`.execute(app.deps.db);
    } catch (err) {
      app.deps.logger.warn({ err }, 'readiness check failed');
      throw new AppError(503, 'service_unavailable', 'The database does not answer.');
    }
    const warnings = app.hasDecorator('machineProvider') ? app.machineProvider.warnings?.() ?? [] : [];
    return warnings.length > 0 ? { ok: true as const, warnings: [...warnings] } : { ok: true as const };
  });

  app.get('/metrics', {
    config: { auth: 'none' },
    schema: { tags, summary: 'Prometheus metrics', response: { 200: Type.String() } },
  }, async (_request, reply) => {
    reply.type(app.metrics.registry.contentType);
    return app.metrics.registry.metrics();
  });
};
