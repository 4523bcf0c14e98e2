import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import { Agent, fetch as undiciFetch } from 'undici';
import type { Deps } from '../deps.ts';
import { checkedLookup, checkHostLiteral, createDnsResolver, uncheckedLookup, type ResolveAll } from '../event-webhooks/targets.ts';
import { newId } from '../shared/ids.ts';
import { generateToken } from '../shared/secrets.ts';
import { createAdapterFactory } from './oauth.adapter.ts';
import { sharedSecret } from './oauth.repository.ts';
import { assertAllowedRedirectUris } from './redirect-uris.ts';
import { ACCESS_TOKEN_TTL_S, CONSENT_PAGE, GRANT_TTL_S, MCP_SCOPE, mcpResource } from './oauth.resource.ts';

/** Where the authorization server's endpoints live (the issuer is PUBLIC_URL itself, so its metadata is at the root's well-known path). */
export const OAUTH_ROUTES = {
  authorization: '/oauth/authorize',
  token: '/oauth/token',
  registration: '/oauth/register',
  revocation: '/oauth/revoke',
  jwks: '/oauth/jwks',
  userinfo: '/oauth/userinfo',
  end_session: '/oauth/logout',
  introspection: '/oauth/introspect',
} as const;

const REFRESH_TOKEN_TTL_S = 30 * 24 * 3600;

export interface ProviderOptions {
  /** Name resolution for client metadata documents (tests stand in for DNS, as for webhook targets). */
  resolveAll?: ResolveAll;
}

/**
 * The authorization server: oidc-provider (OpenID certified), configured for
 * what the MCP authorization specification asks and nothing else: the
 * authorization code flow with PKCE S256, public clients registered by
 * dynamic client registration (RFC 7591) or identified by a Client ID
 * Metadata Document, access tokens bound to the MCP resource (RFC 8707),
 * rotating refresh tokens (a reused one revokes the grant: oidc-provider's
 * own rule), revocation (RFC 7009), `iss` in the authorization response (RFC 9207).
 * Tokens take our format (`tmo_`/`tmr_`) and are stored hashed by the adapter.
 */
export async function createOAuthProvider(deps: Deps, options: ProviderOptions = {}): Promise<{ provider: Provider; close(): Promise<void> }> {
  const { publicUrl, webhook } = deps.config;
  const resource = mcpResource(publicUrl);
  const cookieKey = await sharedSecret(deps.db, 'cookie-keys', () => randomBytes(32).toString('base64url'));
  const guarded = guardedFetch(webhook, options.resolveAll);

  const configuration: Configuration = {
    adapter: createAdapterFactory(deps),
    clients: [],
    routes: OAUTH_ROUTES,
    // ID tokens are never issued (no `openid` requests are expected); the key only satisfies the library.
    jwks: { keys: [generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }) as never] },
    cookies: { keys: [cookieKey], long: { signed: true }, short: { signed: true } },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    scopes: ['openid', 'offline_access', MCP_SCOPE],
    claims: { openid: ['sub'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: 'ES256',
    },
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    // The library's hook for checking client metadata, run for every client it builds (registered or from a metadata document).
    extraClientMetadata: {
      properties: ['redirect_uris'],
      validator: (_ctx, key, value) => {
        if (key === 'redirect_uris') assertAllowedRedirectUris(value);
      },
    },
    interactions: { url: (_ctx, interaction) => `${CONSENT_PAGE}?uid=${encodeURIComponent(interaction.uid)}` },
    // Consent is asked every time: the grant used is only the one the consent page just made.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      RefreshToken: REFRESH_TOKEN_TTL_S,
      Grant: GRANT_TTL_S,
      Interaction: 3600,
      Session: 24 * 3600,
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true, initialAccessToken: false },
      revocation: { enabled: true },
      userinfo: { enabled: false },
      introspection: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, requested) => {
          if (requested !== resource) throw new errors.InvalidTarget(`the only resource here is ${resource}`);
          return { scope: MCP_SCOPE, audience: resource, accessTokenTTL: ACCESS_TOKEN_TTL_S, accessTokenFormat: 'opaque' };
        },
      },
    },
    fetch: guarded as unknown as Configuration['fetch'],
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = errorPage(out.error, out.error_description);
    },
  };

  const provider = new Provider(publicUrl, configuration);
  // The routes hand requests over with PUBLIC_URL's host and scheme in X-Forwarded-* (see oauth.routes.ts), so every URL it writes is ours.
  provider.proxy = true;
  // Access tokens `tmo_`, refresh tokens `tmr_`, in GitHub's format; grants get our ids.
  idsOf(provider.AccessToken, () => generateToken('tmo_'));
  idsOf(provider.RefreshToken, () => generateToken('tmr_'));
  idsOf(provider.Grant, () => newId('grt', deps.clock.now()));
  provider.on('server_error', (ctx: KoaContextWithOIDC, err: Error) => deps.logger.error({ err, route: ctx.oidc?.route }, 'OAuth server error'));
  return { provider, close: guarded.close };
}

/** How a model's instances get their ids (oidc-provider's `generateTokenId`, not in its type definitions). */
function idsOf(model: { prototype: object }, generate: () => string): void {
  (model.prototype as { generateTokenId?: () => string }).generateTokenId = function (this: { format?: string }) {
    // What the library's own generator records besides the id: access tokens here are always opaque.
    this.format = 'opaque';
    return generate();
  };
}

/**
 * Client metadata documents are fetched through the webhook targets' SSRF
 * guard (no private, loopback or link-local address, checked at connect time,
 * no DNS-rebinding gap); WEBHOOK_ALLOW_PRIVATE_TARGETS lets it reach loopback too.
 */
function guardedFetch(config: Deps['config']['webhook'], givenResolveAll?: ResolveAll) {
  const dns = givenResolveAll === undefined ? createDnsResolver({ timeoutMs: 2000 }) : null;
  const resolveAll = givenResolveAll ?? dns!.resolveAll;
  const agent = new Agent({ connect: { timeout: 2500, lookup: config.allowPrivateTargets ? uncheckedLookup(resolveAll) : checkedLookup(resolveAll) } });
  const fetch = async (input: string | URL, init: Record<string, unknown> = {}) => {
    const url = new URL(String(input));
    if (!config.allowPrivateTargets) checkHostLiteral(url.hostname);
    return undiciFetch(url, { ...init, dispatcher: agent } as Parameters<typeof undiciFetch>[1]);
  };
  return Object.assign(fetch, {
    close: async () => {
      dns?.close();
      await agent.close();
    },
  });
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** What a person sees when the authorization request cannot go back to the client (an unknown client or redirect URI). */
function errorPage(error: string, description: string | undefined): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Authorization failed</title></head><body>
<main><h1>This application cannot connect</h1><p><code>${escapeHtml(error)}</code>: ${escapeHtml(description ?? '')}</p>
<p>Nothing was shared with it. Close this page and try again from the application.</p></main></body></html>`;
}
