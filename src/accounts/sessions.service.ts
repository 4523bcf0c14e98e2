import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import type { Principal } from '../http/principal.ts';
import { DAY, MINUTE, toIso } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import {
  deleteSession,
  deleteSessionByTokenHash,
  findSessionByTokenHash,
  insertSession,
  listSessionRows,
  touchSession,
} from './sessions.repository.ts';
import { notFound } from '../http/errors.ts';
import { inTransaction } from '../db/transaction.ts';
import { recordSecurityEvent } from '../security-log/security-log.ts';

export const SESSION_IDLE_MS = 30 * DAY;
/** lastSeenAt is written at most this often, so reading pages does not mean writing rows. */
const SESSION_TOUCH_INTERVAL_MS = MINUTE;
const USER_AGENT_MAX = 512;

export interface ClientInfo {
  ip: string;
  userAgent: string | undefined;
}

export interface SessionView {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  userAgent: string | null;
  current: boolean;
}

export function clientInfo(request: FastifyRequest): ClientInfo {
  return { ip: request.ip, userAgent: request.headers['user-agent'] };
}

/** A new server-side session; the token goes only into the cookie. */
export async function createSession(db: Kysely<DB>, accountId: string, client: ClientInfo, now: number): Promise<{ id: string; token: string }> {
  const token = generateOpaqueToken();
  const id = newId('ses', now);
  await insertSession(db, {
    id,
    account_id: accountId,
    token_hash: hashToken(token),
    user_agent: client.userAgent?.slice(0, USER_AGENT_MAX) ?? null,
    ip: client.ip,
    created_at: now,
    last_seen_at: now,
    authenticated_at: now,
  });
  return { id, token };
}

export async function authenticateSession(request: FastifyRequest, reply: FastifyReply, token: string): Promise<Principal | null> {
  const { db, clock, config } = request.server.deps;
  const now = clock.now();
  const session = await findSessionByTokenHash(db, hashToken(token));
  if (session === undefined || session.last_seen_at + SESSION_IDLE_MS <= now) return null;
  if (now - session.last_seen_at >= SESSION_TOUCH_INTERVAL_MS) {
    await touchSession(db, session.id, now);
    setSessionCookie(reply, config, token);
  }
  return { kind: 'session', accountId: session.account_id, sessionId: session.id, authenticatedAt: session.authenticated_at ?? session.created_at };
}

export async function listSessions(db: Kysely<DB>, accountId: string, currentSessionId: string | null, limit: number, cursor: string | undefined) {
  const rows = await listSessionRows(db, accountId, limit, cursor);
  return rows.map(
    (row): SessionView => ({
      id: row.id,
      createdAt: toIso(row.created_at),
      lastSeenAt: toIso(row.last_seen_at),
      userAgent: row.user_agent,
      current: row.id === currentSessionId,
    }),
  );
}

/** Ends the session behind a cookie token, if there is one, and logs it. */
export async function signOut(database: Database, token: string, origin: ClientInfo, now: number): Promise<void> {
  await inTransaction(database, async (tx) => {
    const accountId = await deleteSessionByTokenHash(tx.db, hashToken(token));
    if (accountId !== undefined) await recordSecurityEvent(tx.db, { accountId, type: 'sign_out', at: now, origin });
  });
}

/**
 * Ends one session of the account.
 * @throws AppError 404 unknown session (or another account's).
 */
export async function endSession(database: Database, accountId: string, sessionId: string, origin: ClientInfo, now: number): Promise<void> {
  const ended = await inTransaction(database, async (tx) => {
    if (!(await deleteSession(tx.db, accountId, sessionId))) return false;
    await recordSecurityEvent(tx.db, { accountId, type: 'session_revoked', at: now, origin, detail: { sessionId } });
    return true;
  });
  if (!ended) throw notFound('The session');
}

export function sessionCookieName(config: Pick<Config, 'secureCookies'>): string {
  return config.secureCookies ? '__Host-session' : 'session';
}

export function readSessionCookie(request: FastifyRequest): string | undefined {
  const value = request.cookies[sessionCookieName(request.server.deps.config)];
  return value === undefined || value === '' ? undefined : value;
}

export function setSessionCookie(reply: FastifyReply, config: Pick<Config, 'secureCookies'>, token: string): void {
  reply.setCookie(sessionCookieName(config), token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: config.secureCookies,
    path: '/',
    maxAge: SESSION_IDLE_MS / 1000,
  });
}

export function clearSessionCookie(reply: FastifyReply, config: Pick<Config, 'secureCookies'>): void {
  reply.clearCookie(sessionCookieName(config), { httpOnly: true, sameSite: 'lax', secure: config.secureCookies, path: '/' });
}
