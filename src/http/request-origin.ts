import type { FastifyRequest } from 'fastify';

/** Where a request came from, as the security log records it: the client IP (see TRUST_PROXY) and its User-Agent. */
export function originOf(request: FastifyRequest): { ip: string; userAgent: string | undefined } {
  return { ip: request.ip, userAgent: request.headers['user-agent'] };
}
