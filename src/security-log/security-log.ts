import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { newId } from '../shared/ids.ts';

/** What the security log records. */
export const SECURITY_EVENT_TYPES = [
  'sign_in',
  'sign_in_failed',
  'sign_out',
  'password_changed',
  'password_reset',
  'email_verified',
  'totp_enabled',
  'totp_disabled',
  'passkey_added',
  'passkey_removed',
  'recovery_codes_generated',
  'recovery_code_used',
  'api_key_created',
  'api_key_revoked',
  'oauth_grant_created',
  'oauth_grant_revoked',
  'session_revoked',
  'webhook_secret_rotated',
] as const;

export type SecurityEventType = (typeof SECURITY_EVENT_TYPES)[number];

/** Where the request came from; both are what the client sent, shown back to the account holder. */
export interface RequestOrigin {
  ip: string;
  userAgent: string | undefined;
}

/** Names and ids that make an entry readable; never a secret, a code or a token. */
export type SecurityDetail = Record<string, string>;

const USER_AGENT_MAX = 512;

/**
 * Writes one entry. Pass the transaction of the change it tells of, so that
 * the log holds exactly the changes that happened.
 */
export async function recordSecurityEvent(
  db: Kysely<DB>,
  event: { accountId: string; type: SecurityEventType; at: number; origin: RequestOrigin | null; detail?: SecurityDetail },
): Promise<void> {
  await db
    .insertInto('security_log')
    .values({
      id: newId('sec', event.at),
      account_id: event.accountId,
      type: event.type,
      at: event.at,
      ip: event.origin?.ip ?? null,
      user_agent: event.origin?.userAgent?.slice(0, USER_AGENT_MAX) ?? null,
      detail: event.detail === undefined ? null : JSON.stringify(event.detail),
    })
    .execute();
}
