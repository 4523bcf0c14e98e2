import type { FastifyRequest } from 'fastify';
import { MINUTE } from '../shared/clock.ts';
import { AppError } from './errors.ts';

/** How long a sign-in or a reauthentication counts as recent. */
export const RECENT_AUTHENTICATION_MS = 10 * MINUTE;

export const reauthenticationRequired = () =>
  new AppError(403, 'reauthentication_required', 'Confirm your password or a second-factor code first (POST /api/me/reauthenticate): this needs an authentication within the last 10 minutes.');

/**
 * For dashboard sessions: the holder proved who they are within the last 10
 * minutes. Other credentials pass (an API key cannot reauthenticate, and what
 * it may do is decided by whoever made it).
 * @throws AppError 403 reauthentication_required
 */
export function requireRecentAuthentication(request: FastifyRequest, now: number): void {
  const principal = request.principal;
  if (principal?.kind === 'session' && now - principal.authenticatedAt > RECENT_AUTHENTICATION_MS) throw reauthenticationRequired();
}
