import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParamsSchema, responses } from '../../http/schemas.ts';
import { portOf } from './preview-access.ts';
import { previewHostRoute } from './preview-host.ts';
import { invalidPort } from './previews.errors.ts';
import { createPreviewLink, previewSettings, setPortPublic, type Previews } from './previews.service.ts';
import { PortVisibilitySchema, PreviewLinkBody, PreviewLinkSchema, PreviewSettingsSchema } from './previews.schemas.ts';

const tags = ['machines'];

/**
 * A machine's HTTP ports at their preview URLs (PREVIEW_URL),
 * private by default. The preview hosts are taken at the HTTP server, before
 * any of the API's routes; these are the owner's settings.
 */
export const previewsRoutes: FastifyPluginAsyncTypebox<{ previews: Previews }> = async (app, { previews }) => {
  app.hostRoutes.add(previewHostRoute(previews, app.machineProvider));

  app.get('/api/machines/:id/previews', {
    schema: { tags, summary: "The machine's preview token, its preview URL and the ports made public", params: IdParamsSchema, response: responses({ 200: PreviewSettingsSchema }) },
  }, async (request) => previewSettings(previews, accountIdOf(request), request.params.id));

  app.post('/api/machines/:id/previews', {
    schema: {
      tags,
      summary: 'A signed link to a port’s preview, valid until it expires or the machine token changes',
      params: IdParamsSchema,
      body: PreviewLinkBody,
      response: responses({ 201: PreviewLinkSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createPreviewLink(previews, accountIdOf(request), request.params.id, request.body)));

  app.patch('/api/machines/:id/previews/:port', {
    schema: {
      tags,
      summary: 'Make a port’s preview public (anyone with its URL) or private again',
      // A path's numbers are text: plain digits here, its range checked by portOf (only queries carry coerced numbers).
      params: Type.Object({ id: IdParamsSchema.properties.id, port: Type.String({ pattern: '^[0-9]{1,5}$', description: 'A TCP port inside the machine, 1–65535' }) }, { additionalProperties: false }),
      body: Type.Object({ public: Type.Boolean() }, { additionalProperties: false }),
      response: responses({ 200: PortVisibilitySchema }),
    },
  }, async (request) => {
    const port = portOf(request.params.port);
    if (port === null) throw invalidPort();
    return setPortPublic(previews, accountIdOf(request), request.params.id, port, request.body.public);
  });
};
