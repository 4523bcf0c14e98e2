import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { responses } from '../http/schemas.ts';

const tags = ['dashboard'];

/**
 * Where a mail the service sends ends up, as the getting-started checklist
 * tells a new user where to find their confirmation link. Only the folder of
 * `.eml` files is named: of SMTP nothing but the fact (its URL may carry a
 * password, and its host is the operator's business).
 */
const MailDeliverySchema = Type.Union([
  Type.Object({ delivery: Type.Literal('files'), folder: Type.String({ description: 'MAIL_DIR on the server: one .eml file per mail' }) }),
  Type.Object({ delivery: Type.Literal('smtp') }),
]);

/**
 * What the dashboard asks the API about this service itself. The answers
 * describe the server, not the account, so they are for the dashboard's
 * session only: an API key has no use for them.
 */
export const dashboardApiRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app.deps;

  app.get('/api/dashboard/mail', {
    config: { auth: 'session' },
    schema: {
      tags,
      summary: 'How this service sends mail: written as .eml files into a folder (named), or sent through SMTP (nothing else said)',
      response: responses({ 200: MailDeliverySchema }),
    },
  }, async () => (config.smtpUrl === null ? { delivery: 'files' as const, folder: config.mailDir } : { delivery: 'smtp' as const }));
};
