import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, forbidden, invalidBearerToken, unauthenticated } from './errors.ts';
import { comesFromOwnOrigin } from './origin.ts';
import type { Principal } from './principal.ts';

/**
 * What a route accepts:
 * - `none`: anyone;
 * - `account`: the session cookie or an API key (the default);
 * - `session`: only the dashboard's session cookie;
 * - `machine`: an account credential, or the machine token of the machine in the path's `:id`;
 * - `mcp`: an account credential, or an OAuth access token (`/api/mcp` only).
 */
export type AuthRequirement = 'none' | 'account' | 'session' | 'machine' | 'mcp';

/** Null for an unknown token. May answer synchronously (a cached API key): most requests then cost no promise at all. */
export type BearerAuthenticator = (request: FastifyRequest, token: string) => Principal | null | Promise<Principal | null>;

/** The dashboard's session cookie: how to find its token in a request, and whose session it is. */
export interface CookieCredential {
  read(request: FastifyRequest): string | undefined;
  authenticate(request: FastifyRequest, reply: FastifyReply, token: string): Promise<Principal | null>;
}

/** Where credential domains register how their credentials are recognised; this hook knows none of them itself. */
export interface Credentials {
  /** A kind of Bearer token, by its four-character prefix (`tmk_`, `tmm_`, `tmo_`). */
  bearer(prefix: string, authenticate: BearerAuthenticator): void;
  cookie(credential: CookieCredential): void;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthRequirement;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    credentials: Credentials;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Every request that carries the cookie, except a safe-method page load
 * outside the API (a dashboard page or a live view opened from a link in
 * another site, which a browser sends with the cookie and `Sec-Fetch-Site: cross-site`).
 * Decided by the route the router matched, never by the raw URL: the router
 * decodes the path, so `/%61pi/keys` is `/api/keys` to it but not to `startsWith('/api/')`.
 * An unmatched request (no route) is checked too.
 */
function needsOriginCheck(request: FastifyRequest): boolean {
  if (!SAFE_METHODS.has(request.method)) return true;
  const route = request.routeOptions.url;
  return route === undefined || route.startsWith('/api/');
}

const MACHINE_TOKEN_SCOPE = "A machine token works only on its own machine's /mcp and /live-view endpoints.";
const OAUTH_TOKEN_SCOPE = 'An OAuth access token works only on /api/mcp, the resource it was issued for.';

export const authPlugin = fp(
  async (app) => {
    app.decorateRequest('principal', null);
    const bearers = new Map<string, BearerAuthenticator>();
    let cookie: CookieCredential | null = null;
    app.decorate('credentials', {
      bearer: (prefix, authenticate) => void bearers.set(prefix, authenticate),
      cookie: (credential) => void (cookie = credential),
    } satisfies Credentials);

    // Callback style: most requests are settled without waiting on anything, and a promise per request is not free.
    app.addHook('onRequest', (request, reply, done) => {
      // An unknown route is a 404 for everyone: asking for a credential there would misreport the mistake.
      const requirement = request.is404 ? 'none' : (request.routeOptions.config.auth ?? 'account');
      let bearer: string | undefined;
      try {
        bearer = readBearer(request, requirement !== 'none');
      } catch (error) {
        return done(error as Error);
      }
      const sessionToken = bearer === undefined ? cookie?.read(request) : undefined;
      if (sessionToken !== undefined && needsOriginCheck(request) && !comesFromOwnOrigin(request.method, request.headers, app.deps.config.publicUrl)) {
        return done(new AppError(403, 'cross_site', 'Requests signed in with the session cookie must come from the dashboard itself.'));
      }
      if (requirement === 'none') return done();
      let authenticated: Principal | Promise<Principal>;
      try {
        authenticated = bearer !== undefined ? authenticateBearer(bearers, request, bearer) : authenticateCookie(cookie, request, reply, sessionToken);
        if (!(authenticated instanceof Promise)) {
          admit(request, requirement, authenticated);
          return done();
        }
      } catch (error) {
        return done(error as Error);
      }
      authenticated.then((principal) => admit(request, requirement, principal)).then(() => done(), done);
    });
  },
  { name: 'auth', dependencies: ['core'] },
);

/**
 * The Bearer token, if any. Another scheme is refused where a credential is
 * needed and ignored elsewhere (a sender's own Basic credentials on an inbound webhook, say).
 * @throws AppError 401 when `strict` and the header is not a Bearer token.
 */
function readBearer(request: FastifyRequest, strict: boolean): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (match) return match[1];
  if (strict) throw unauthenticated('Use "Authorization: Bearer <token>".');
  return undefined;
}

/** @throws AppError 401 for an unknown token (synchronously, or as the promise's rejection). */
function authenticateBearer(bearers: Map<string, BearerAuthenticator>, request: FastifyRequest, token: string): Principal | Promise<Principal> {
  const authenticate = bearers.get(token.slice(0, 4));
  const principal = authenticate ? authenticate(request, token) : null;
  return principal instanceof Promise ? principal.then(knownBearer) : knownBearer(principal);
}

/** @throws AppError 401 when the token was unknown. */
function knownBearer(principal: Principal | null): Principal {
  if (principal === null) throw invalidBearerToken();
  return principal;
}

/** @throws AppError 403 when the credential is valid but not allowed on this route. */
function admit(request: FastifyRequest, requirement: AuthRequirement, principal: Principal): void {
  request.principal = principal;
  assertInScope(requirement, principal, request);
}

async function authenticateCookie(cookie: CookieCredential | null, request: FastifyRequest, reply: FastifyReply, token: string | undefined): Promise<Principal> {
  const principal = token === undefined || cookie === null ? null : await cookie.authenticate(request, reply, token);
  if (principal === null) throw unauthenticated();
  return principal;
}

/** @throws AppError 403 when the credential is valid but not allowed on this route. */
function assertInScope(requirement: AuthRequirement, principal: Principal, request: FastifyRequest): void {
  if (principal.kind === 'oauth') {
    if (requirement !== 'mcp') throw forbidden(OAUTH_TOKEN_SCOPE);
    return;
  }
  if (requirement === 'session' && principal.kind !== 'session') {
    throw forbidden(principal.kind === 'machine' ? MACHINE_TOKEN_SCOPE : 'This endpoint is for the signed-in dashboard, not API keys.');
  }
  if (principal.kind !== 'machine') return;
  const pathMachineId = (request.params as { id?: string } | undefined)?.id;
  if (requirement !== 'machine' || pathMachineId !== principal.machineId) throw forbidden(MACHINE_TOKEN_SCOPE);
}

/**
 * The account a request acts for; only called on routes that require a credential.
 * @throws AppError 401 when the request carries none (a route declared `auth: 'none'` calling it by mistake).
 */
export function accountIdOf(request: FastifyRequest): string {
  if (request.principal === null) throw unauthenticated();
  return request.principal.accountId;
}

/**
 * The session a `session`-only route runs under.
 * @throws AppError 401 when the request is not signed in with the session cookie.
 */
export function sessionOf(request: FastifyRequest): Extract<Principal, { kind: 'session' }> {
  if (request.principal?.kind !== 'session') throw unauthenticated();
  return request.principal;
}
