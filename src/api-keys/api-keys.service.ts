import type { Kysely } from 'kysely';
import type { Database } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import type { Principal } from '../http/principal.ts';
import { MINUTE, toIso, toIsoOrNull } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import { generateToken, hashToken, isWellFormedToken } from '../shared/secrets.ts';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest, notFound } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { announce } from '../db/signals.ts';
import { recordSecurityEvent, type RequestOrigin } from '../security-log/security-log.ts';
import type { BearerAuthenticator } from '../http/auth.ts';
import type { Clock } from '../shared/clock.ts';
import type { ApiKeyCache, KnownKey } from './api-key-cache.ts';
import { deleteApiKey, findApiKeyByTokenHash, insertApiKey, listApiKeyRows, recordApiKeyUse } from './api-keys.repository.ts';

/** `lastUsedAt` is written at most once a minute per key. */
const LAST_USED_RESOLUTION_MS = MINUTE;
const PREFIX_LENGTH = 8;

export interface ApiKeyView {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

export interface CreatedApiKey {
  id: string;
  name: string;
  key: string;
  createdAt: string;
}

/**
 * The key itself is in this answer only; the database keeps its SHA-256. The security log notes it in the same transaction.
 * @throws AppError 400 when the name is blank.
 */
export async function createApiKey(database: Database, accountId: string, rawName: string, now: number, origin: RequestOrigin | null = null): Promise<CreatedApiKey> {
  const name = rawName.trim();
  if (name === '') throw invalidRequest('name must not be blank.');
  const key = generateToken('tmk_');
  const id = newId('key', now);
  await inTransaction(database, async (tx) => {
    await insertApiKey(tx.db, {
      id,
      account_id: accountId,
      name,
      prefix: key.slice(0, PREFIX_LENGTH),
      token_hash: hashToken(key),
      created_at: now,
      last_used_at: null,
    });
    await recordSecurityEvent(tx.db, { accountId, type: 'api_key_created', at: now, origin, detail: { apiKeyId: id, name } });
  });
  return { id, name, key, createdAt: toIso(now) };
}

export async function listApiKeys(db: Kysely<DB>, accountId: string, limit: number, cursor: string | undefined): Promise<ApiKeyView[]> {
  const rows = await listApiKeyRows(db, accountId, limit, cursor);
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    createdAt: toIso(row.created_at),
    lastUsedAt: toIsoOrNull(row.last_used_at),
  }));
}

export interface ApiKeyAuthDeps {
  db: Kysely<DB>;
  clock: Clock;
  cache: ApiKeyCache;
  /** Changes whenever another process has committed to a shared SQLite file (see otherProcessesCommits). */
  otherProcessesCommits: () => number;
}

/**
 * Bearer authenticator for `tmk_` tokens. A key held in memory, whose use was
 * recorded within the minute, is answered synchronously (the common case, on
 * every request of a busy client); otherwise a malformed key is refused
 * without a lookup, and a good one is read and remembered.
 */
export function apiKeyAuthenticator(deps: ApiKeyAuthDeps): BearerAuthenticator {
  return (_request, token) => {
    const tokenHash = hashToken(token);
    const now = deps.clock.now();
    // PostgreSQL processes hear revocations by NOTIFY; on a shared SQLite file nothing tells them, so ask.
    const dataVersion = deps.otherProcessesCommits();
    const known = deps.cache.get(tokenHash, now, dataVersion);
    if (known !== undefined && !useUnrecorded(known, now)) return principalOf(known);
    if (known === undefined && !isWellFormedToken(token, 'tmk_')) return null;
    return lookUpApiKey(deps, tokenHash, known, dataVersion);
  };
}

async function lookUpApiKey(deps: ApiKeyAuthDeps, tokenHash: string, known: KnownKey | undefined, dataVersion: number): Promise<Principal | null> {
  const { db, clock, cache: apiKeyCache } = deps;
  let key = known;
  let now = clock.now();
  if (key === undefined) {
    const startedAt = apiKeyCache.begin();
    key = await findApiKeyByTokenHash(db, tokenHash);
    if (key === undefined) return null;
    now = clock.now();
    apiKeyCache.remember(tokenHash, key, now, startedAt, dataVersion);
  }
  if (useUnrecorded(key, now)) {
    key.lastUsedAt = now;
    await recordApiKeyUse(db, key.id, now, LAST_USED_RESOLUTION_MS);
  }
  return principalOf(key);
}

const useUnrecorded = (key: KnownKey, now: number) => key.lastUsedAt === null || now - key.lastUsedAt >= LAST_USED_RESOLUTION_MS;

const principalOf = (key: KnownKey): Principal => ({ kind: 'api_key', accountId: key.accountId, apiKeyId: key.id, account: key.account, secondFactor: key.secondFactor });

/**
 * Deletes the key and tells every process: it fails at once.
 * @throws AppError 404 unknown key (or another account's).
 */
export async function revokeApiKey(deps: Deps, accountId: string, id: string, origin: RequestOrigin | null = null): Promise<void> {
  const deleted = await inTransaction(deps.database, async (tx) => {
    const removed = await deleteApiKey(tx.db, accountId, id);
    if (removed !== undefined) {
      await announce(deps.signals, tx, `api-key:${id}`);
      await recordSecurityEvent(tx.db, { accountId, type: 'api_key_revoked', at: deps.clock.now(), origin, detail: { apiKeyId: id, name: removed } });
    }
    return removed !== undefined;
  });
  if (!deleted) throw notFound('The API key');
}
