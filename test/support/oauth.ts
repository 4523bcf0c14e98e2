import { strict as assert } from 'node:assert';
import { createHash, randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { asSession, type TestContext, type TestUser } from './app.ts';

export const REDIRECT_URI = 'http://127.0.0.1:47123/callback';

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Cookies a browser would keep across the authorization request (oidc-provider's interaction and resume cookies). */
export class CookieJar {
  readonly #cookies = new Map<string, string>();
  take(response: LightMyRequestResponse): void {
    for (const cookie of response.cookies) {
      if (cookie.value === '' || (cookie.maxAge !== undefined && cookie.maxAge <= 0)) this.#cookies.delete(cookie.name);
      else this.#cookies.set(cookie.name, cookie.value);
    }
  }
  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

export async function registerClient(ctx: TestContext, metadata: Record<string, unknown> = {}): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/oauth/register',
    payload: { client_name: 'Test Connector', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], ...metadata },
  });
  assert.equal(response.statusCode, 201, response.body);
  return response.json().client_id;
}

export interface Authorization {
  uid: string;
  jar: CookieJar;
  verifier: string;
}

/** The client sends the browser to the authorization endpoint; it lands on the consent page. */
export async function startAuthorization(ctx: TestContext, clientId: string, params: Record<string, string> = {}): Promise<Authorization> {
  const { verifier, challenge } = pkcePair();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st4te',
    scope: 'mcp',
    resource: `${ctx.config.publicUrl}/api/mcp`,
    ...params,
  });
  const jar = new CookieJar();
  const response = await ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
  assert.equal(response.statusCode, 303, response.body);
  jar.take(response);
  const location = new URL(String(response.headers.location), ctx.config.publicUrl);
  assert.equal(location.pathname, '/oauth/consent');
  return { uid: location.searchParams.get('uid')!, jar, verifier };
}

/** The account holder answers on the consent page; the browser follows back to the client's redirect URI. */
export async function answerConsent(ctx: TestContext, user: TestUser, authorization: Authorization, answer: 'allow' | 'deny'): Promise<URL> {
  const response = await ctx.app.inject({ method: 'POST', url: `/api/oauth/consent/${authorization.uid}/${answer}`, headers: asSession(user.session, ctx.config.publicUrl) });
  assert.equal(response.statusCode, 200, response.body);
  const resume = new URL(response.json().redirectTo);
  const back = await ctx.app.inject({ method: 'GET', url: `${resume.pathname}${resume.search}`, headers: { cookie: authorization.jar.header() } });
  assert.equal(back.statusCode, 303, back.body);
  return new URL(String(back.headers.location));
}

export async function tokenRequest(ctx: TestContext, form: Record<string, string>): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(form).toString() });
}

export interface Tokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: string;
}

/** The whole flow for one account and client: consent, code, tokens. */
export async function connectApplication(ctx: TestContext, user: TestUser, clientId: string): Promise<Tokens> {
  const authorization = await startAuthorization(ctx, clientId);
  const back = await answerConsent(ctx, user, authorization, 'allow');
  const code = back.searchParams.get('code');
  assert.ok(code, back.toString());
  const response = await tokenRequest(ctx, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: authorization.verifier, resource: `${ctx.config.publicUrl}/api/mcp` });
  assert.equal(response.statusCode, 200, response.body);
  return response.json();
}

/** One JSON-RPC request to an MCP endpoint, statelessly, as a 2025-06-18 client. */
export async function mcpCall(ctx: TestContext, token: string, method: string, params: Record<string, unknown> = {}, url = '/api/mcp'): Promise<LightMyRequestResponse> {
  return ctx.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' },
    payload: { jsonrpc: '2.0', id: 1, method, params },
  });
}
