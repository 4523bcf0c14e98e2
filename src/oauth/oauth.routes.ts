import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type Provider from 'oidc-provider';
import { Type } from 'typebox';
import { accountIdOf, sessionOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { IdParamsSchema, NullableTimestamp, responses, Timestamp } from '../http/schemas.ts';
import { refuseBody } from '../http/validation.ts';
import { originOf } from '../http/request-origin.ts';
import { enforceOAuthLimit } from './oauth.limits.ts';
import { MCP_SCOPE, mcpResource } from './oauth.resource.ts';
import { allowConsent, denyConsent, describeConsent, listApplications, revokeApplication } from './oauth.service.ts';

const tags = ['oauth'];
const hide = { hide: true };

/** RFC 9728 section 3: the metadata of `/api/mcp` lives at the well-known path with the resource's path appended. */
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/api/mcp';

const UidParams = Type.Object({ uid: Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_-]+$' }) }, { additionalProperties: false });

const ConsentSchema = Type.Object({
  client: Type.Object({
    id: Type.String({ description: 'client_id: a registered id, or the URL of its metadata document' }),
    name: Type.String(),
    redirectHost: Type.String({ description: 'Where the answer goes: the host of the redirect URI' }),
  }),
  scopes: Type.Array(Type.String()),
});

const RedirectSchema = Type.Object({ redirectTo: Type.String({ description: 'Where the browser goes next: back to the authorization request' }) });

const ApplicationSchema = Type.Object({
  id: Type.String({ description: 'The grant (grt_…)' }),
  clientId: Type.String(),
  clientName: Type.String(),
  redirectHost: Type.String(),
  createdAt: Timestamp,
  lastUsedAt: NullableTimestamp,
});

/**
 * The authorization server (oidc-provider) mounted under `/oauth/` and its
 * metadata at the root's well-known paths; the protected resource metadata of
 * `/api/mcp`; the consent API behind the dashboard's consent page; and the
 * account's connected applications.
 */
export function oauthRoutes(authorizationServer: () => Promise<Provider>): FastifyPluginAsyncTypebox {
  return async (app) => {
    const { deps } = app;
    const resource = mcpResource(deps.config.publicUrl);

    await app.register(async (mounted) => {
      // oidc-provider reads its own bodies (form-encoded, and JSON for registration): leave the stream to it.
      mounted.removeAllContentTypeParsers();
      mounted.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
      const ownOrigin = new URL(deps.config.publicUrl);
      const handOver = async (request: FastifyRequest, reply: FastifyReply, url?: string) => {
        const callback = (await authorizationServer()).callback();
        reply.hijack();
        if (url !== undefined) request.raw.url = url;
        // The URLs it writes (metadata, redirects, the issuer it checks) are PUBLIC_URL's, whatever Host the request came with.
        request.raw.headers['x-forwarded-host'] = ownOrigin.host;
        request.raw.headers['x-forwarded-proto'] = ownOrigin.protocol.slice(0, -1);
        request.raw.headers['x-forwarded-for'] = request.ip;
        callback(request.raw, reply.raw);
      };
      mounted.route({
        method: ['GET', 'POST', 'OPTIONS', 'HEAD'],
        url: '/oauth/*',
        config: { auth: 'none' },
        schema: hide,
        handler: async (request, reply) => {
          // Before the library stores anything: a client over its limit adds no client and no interaction.
          await enforceOAuthLimit(deps, request.method, new URL(request.url, 'http://localhost').pathname, request.ip);
          return handOver(request, reply);
        },
      });
      for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
        mounted.route({
          method: ['GET', 'OPTIONS', 'HEAD'],
          url: path,
          config: { auth: 'none' },
          schema: hide,
          // RFC 8414 metadata is the same document as OpenID discovery's.
          handler: (request, reply) => handOver(request, reply, '/.well-known/openid-configuration'),
        });
      }
    });

    const protectedResourceMetadata = {
      resource,
      authorization_servers: [deps.config.publicUrl],
      scopes_supported: [MCP_SCOPE],
      bearer_methods_supported: ['header'],
      resource_name: 'Machine Platform MCP',
      resource_documentation: `${deps.config.publicUrl}/docs/errors`,
    };
    for (const path of [PROTECTED_RESOURCE_METADATA_PATH, '/.well-known/oauth-protected-resource']) {
      app.get(path, {
        config: { auth: 'none' },
        schema: { tags, summary: 'Protected resource metadata of /api/mcp (RFC 9728)' },
      }, async (_request, reply) => reply.header('cache-control', 'public, max-age=3600').header('access-control-allow-origin', '*').send(protectedResourceMetadata));
    }

    app.get('/api/oauth/consent/:uid', {
      config: { auth: 'session' },
      schema: { tags, summary: 'The authorization request a consent page asks about', params: UidParams, response: responses({ 200: ConsentSchema }) },
    }, async (request) => {
      sessionOf(request);
      return describeConsent(await authorizationServer(), request.params.uid);
    });

    app.post('/api/oauth/consent/:uid/allow', {
      config: { auth: 'session' },
      preValidation: refuseBody,
      schema: { tags, summary: 'Allow the client: the account grants it MCP access', params: UidParams, response: responses({ 200: RedirectSchema }) },
    }, async (request) => allowConsent(deps, await authorizationServer(), request.params.uid, sessionOf(request).accountId, originOf(request)));

    app.post('/api/oauth/consent/:uid/deny', {
      config: { auth: 'session' },
      preValidation: refuseBody,
      schema: { tags, summary: 'Deny the client (it gets access_denied)', params: UidParams, response: responses({ 200: RedirectSchema }) },
    }, async (request) => {
      sessionOf(request);
      return denyConsent(await authorizationServer(), request.params.uid);
    });

    app.get('/api/me/applications', {
      schema: { tags, summary: 'Connected applications: OAuth grants of the account', querystring: ListQuerySchema, response: responses({ 200: pageSchema(ApplicationSchema) }) },
    }, async (request) => {
      const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
      return toPage(await listApplications(deps, accountIdOf(request), limit + 1, request.query.cursor), limit);
    });

    app.delete('/api/me/applications/:id', {
      preValidation: refuseBody,
      schema: { tags, summary: 'Revoke a connected application: its tokens stop working at once', params: IdParamsSchema },
    }, async (request, reply) => {
      await revokeApplication(deps, accountIdOf(request), request.params.id, originOf(request));
      return reply.code(204).send();
    });
  };
}
