import type { Deps } from '../deps.ts';
import { HOUR, MINUTE } from '../shared/clock.ts';
import { enforceLimits, type Limit } from '../rate-limits/rate-limiter.ts';

/**
 * The authorization server's unauthenticated endpoints that store something
 * per request (issue 38): a registration stores a client, an authorization
 * request an interaction. Per client address, like sign-in; far above what a
 * person connecting an application or two needs.
 */
export const OAUTH_LIMITS = {
  registerPerIp: { max: 20, windowMs: HOUR },
  authorizePerIp: { max: 100, windowMs: 15 * MINUTE },
} satisfies Record<string, Limit>;

/** Which limit a request to the mounted authorization server counts in, if any. */
export function oauthLimitOf(method: string, path: string): { name: string; limit: Limit } | undefined {
  if (method === 'POST' && path === '/oauth/register') return { name: 'register', limit: OAUTH_LIMITS.registerPerIp };
  if ((method === 'GET' || method === 'POST') && (path === '/oauth/authorize' || path.startsWith('/oauth/authorize/'))) {
    return { name: 'authorize', limit: OAUTH_LIMITS.authorizePerIp };
  }
  return undefined;
}

/** @throws AppError 429 with Retry-After beyond the address's limit for this endpoint. */
export async function enforceOAuthLimit(deps: Deps, method: string, path: string, ip: string): Promise<void> {
  if (!deps.config.rateLimit) return;
  const which = oauthLimitOf(method, path);
  if (which === undefined) return;
  await enforceLimits(deps.db, [{ key: `oauth-${which.name}:ip:${ip}`, limit: which.limit }], deps.clock.now());
}
