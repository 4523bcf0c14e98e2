import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { responses, Timestamp } from '../http/schemas.ts';
import { toIso } from '../shared/clock.ts';
import { listSecurityLogRows } from './security-log.repository.ts';
import { SECURITY_EVENT_TYPES, type SecurityDetail } from './security-log.ts';

const SecurityLogEntrySchema = Type.Object({
  id: Type.String(),
  type: Type.String({ description: `What happened: ${SECURITY_EVENT_TYPES.join(', ')} (more may be added)` }),
  at: Timestamp,
  ip: Type.Union([Type.String(), Type.Null()]),
  userAgent: Type.Union([Type.String(), Type.Null()]),
  detail: Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()], {
    description: 'Names and ids that make the entry readable (a key\'s name, a passkey\'s, the sign-in method); never a secret, code or token',
  }),
});

export const securityLogRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.deps;
  app.get('/api/me/security-log', {
    schema: {
      tags: ['accounts'],
      summary: "What happened to the account: sign-ins, factor and password changes, keys, grants; newest first, kept 400 days",
      querystring: ListQuerySchema,
      response: responses({ 200: pageSchema(SecurityLogEntrySchema) }),
    },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const rows = await listSecurityLogRows(db, accountIdOf(request), limit + 1, request.query.cursor);
    const entries = rows.map((row) => ({
      id: row.id,
      type: row.type,
      at: toIso(row.at),
      ip: row.ip,
      userAgent: row.user_agent,
      detail: row.detail === null ? null : (JSON.parse(row.detail) as SecurityDetail),
    }));
    return toPage(entries, limit);
  });
};
