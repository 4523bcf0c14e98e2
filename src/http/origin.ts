import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from './errors.ts';

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface OriginHeaders {
  origin?: string | undefined;
  'sec-fetch-site'?: string | undefined;
}

/**
 * The origin rule for requests that carry the session cookie:
 * refused when the browser says the request is cross-site or same-site but
 * another origin, when Origin names another origin, or when an unsafe method
 * arrives with neither header (a client that hides where it comes from).
 */
export function comesFromOwnOrigin(method: string, headers: OriginHeaders, ownOrigin: string): boolean {
  const fetchSite = headers['sec-fetch-site'];
  if (fetchSite === 'cross-site' || fetchSite === 'same-site') return false;
  const origin = headers.origin;
  if (origin !== undefined && origin !== ownOrigin) return false;
  if (origin === undefined && fetchSite === undefined && UNSAFE_METHODS.has(method)) return false;
  return true;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** An MCP Streamable HTTP endpoint: MCP transport security applies (see refuseForeignOriginOnMcp). */
    mcpTransport?: boolean;
  }
}

/** MCP transport security: an Origin header, when present, must name our own origin. */
export function isForeignOrigin(origin: string | undefined, ownOrigin: string): boolean {
  return origin !== undefined && origin !== ownOrigin;
}

/**
 * An onRequest hook, registered before authentication: the MCP specification
 * requires a server to refuse a request whose Origin is present and not its
 * own (a web page of another origin, or DNS rebinding), whatever the credential
 *. It applies to the routes that declare `config.mcpTransport`.
 * @throws AppError 403 cross_site.
 */
export function refuseForeignOriginOnMcp(ownOrigin: string) {
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    if (request.routeOptions.config.mcpTransport !== true || !isForeignOrigin(request.headers.origin, ownOrigin)) return done();
    done(new AppError(403, 'cross_site', 'MCP requests from another origin are refused: an Origin header, when present, must be this service\'s own.'));
  };
}

/**
 * The rule for a WebSocket that acts in a machine (a terminal, control of the
 * screen), checked before the upgrade: signed in with the session cookie, the
 * request must name our own origin in Origin (every browser sends it on a
 * WebSocket, and a page of another site cannot hide it); with an API key
 * (Authorization, which no browser puts on a WebSocket) it may come from anywhere.
 * @throws AppError 403 cross_site.
 */
export function assertSocketFromOwnPage(request: FastifyRequest, ownOrigin: string): void {
  if (request.principal?.kind !== 'session' || request.headers.origin === ownOrigin) return;
  throw new AppError(403, 'cross_site', 'A terminal or control of a screen signed in with the session cookie opens only from the dashboard itself (its Origin header).');
}
