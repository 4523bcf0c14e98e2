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
 * What machines run on here, as the machines page says it: simulated machines
 * run nothing, so a user must know; on Docker, the machine image may still be
 * in its first build. The operator's details (the engine's address, the
 * build's output) stay in the start-up line and the log.
 */
const MachineHostSchema = Type.Object({
  provider: Type.Union([Type.Literal('docker'), Type.Literal('simulated')], { description: 'The provider machines run on: `simulated` machines run no commands' }),
  configured: Type.Union([Type.Literal('auto'), Type.Literal('docker'), Type.Literal('simulated')], { description: 'MACHINE_PROVIDER as set: `auto` chose at start-up, Docker where an engine answered' }),
  image: Type.Union([Type.Literal('ready'), Type.Literal('building'), Type.Literal('failed'), Type.Null()], {
    description: 'The machine image on Docker: `building` on first use (machines created meanwhile wait in `starting`), `failed` when its build failed (`npm run machine-image` builds it); null on the simulated provider',
  }),
});

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

  app.get('/api/dashboard/machines', {
    config: { auth: 'session' },
    schema: {
      tags,
      summary: 'What machines run on here: Docker or simulated (which run nothing), and whether the machine image is still being built',
      response: responses({ 200: MachineHostSchema }),
    },
  }, async () => {
    const host = app.machineHost;
    return { provider: host.provider, configured: host.configured, image: host.image()?.status ?? null };
  });
};
