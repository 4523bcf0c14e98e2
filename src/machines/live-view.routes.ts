import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { createLiveView, LIVE_VIEW_PATH, renderLiveView } from './live-view.service.ts';
import { LiveViewSchema } from './machines.schemas.ts';
import { takeScreenshot } from './screens.service.ts';

const tags = ['machines'];

/** The page may show only its own inline picture: no scripts, no requests elsewhere, no referrer carrying the token. */
const LIVE_VIEW_HEADERS = {
  'content-security-policy': "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'",
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

export const liveViewRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/machines/:id/live-view', {
    config: { auth: 'machine' },
    schema: {
      tags,
      summary: "Create a 15-minute link to the machine's screen (machine token or API key)",
      params: IdParamsSchema,
      response: responses({ 201: LiveViewSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createLiveView(deps, accountIdOf(request), request.params.id)));

  app.get('/api/machines/:id/screenshot', {
    schema: { tags, summary: "A picture of a running machine's screen (image/png; 409 no_display without one)", params: IdParamsSchema },
  }, async (request, reply) => {
    const shot = await takeScreenshot(deps, provider, accountIdOf(request), request.params.id);
    return reply.type(shot.contentType).header('cache-control', 'no-store').send(shot.body);
  });

  app.get(`${LIVE_VIEW_PATH}/:token`, {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'The live view page behind a link (an HTML 404 page once expired or unknown)',
      params: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
      security: [],
    },
  }, async (request, reply) => {
    const page = await renderLiveView(deps, provider, request.params.token);
    return reply.code(page.status).headers(LIVE_VIEW_HEADERS).type('text/html; charset=utf-8').send(page.html);
  });
};
