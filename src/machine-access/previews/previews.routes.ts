import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParamsSchema, responses, Timestamp } from '../../http/schemas.ts';
import { portOf } from './preview-access.ts';
import { previewHostRoute } from './preview-host.ts';
import { invalidPort } from './previews.errors.ts';
import { createPreviewLink, PREVIEW_LINK_SECONDS, previewSettings, setPortPublic, type Previews } from './previews.service.ts';

const tags = ['machines'];

const Port = Type.Integer({ minimum: 1, maximum: 65_535, description: 'A TCP port inside the machine' });

const PreviewLinkSchema = Type.Object({
  url: Type.String({ description: 'Opens the port’s preview: it leaves a cookie for that preview host only, then goes to the URL without the signature' }),
  expiresAt: Timestamp,
});

const PublicPortSchema = Type.Object({ port: Port, url: Type.String({ description: 'The port’s preview URL' }) });

const PreviewSettingsSchema = Type.Object({
  previewToken: Type.Union([Type.String(), Type.Null()], {
    description: 'Send as X-Preview-Token to open any port’s preview; a new machine token makes a new one. Null for a machine without a machine token (waiting in a pool)',
  }),
  urlTemplate: Type.String({ description: 'The preview URL of a port, {port} to be replaced' }),
  publicPorts: Type.Array(PublicPortSchema, { description: 'Ports whose preview answers anyone' }),
});

const PortVisibilitySchema = Type.Object({ port: Port, public: Type.Boolean(), url: Type.String() });

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
      body: Type.Object({
        port: Port,
        expiresInSeconds: Type.Optional(Type.Integer({ minimum: PREVIEW_LINK_SECONDS.min, maximum: PREVIEW_LINK_SECONDS.max, default: PREVIEW_LINK_SECONDS.default })),
      }, { additionalProperties: false }),
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
