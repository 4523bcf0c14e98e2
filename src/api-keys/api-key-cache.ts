import type { Signal } from '../db/signals.ts';
import type { StoredApiKey } from './api-keys.repository.ts';

/** A key as read from the database; `lastUsedAt` is updated in place as this process records uses. */
export type KnownKey = StoredApiKey;

export interface ApiKeyCache {
  /** Starts a lookup; pass the result to `remember`, which ignores it if a key was revoked meanwhile. */
  begin(): number;
  /**
   * `dataVersion`: SQLite's `data_version` read just now (0 where it does not apply); a key
   * remembered under another version is not trusted, since another process has committed since.
   */
  get(tokenHash: string, now: number, dataVersion: number): KnownKey | undefined;
  /** `dataVersion` as read before the lookup began, so a commit during the lookup invalidates the entry. */
  remember(tokenHash: string, key: KnownKey, now: number, startedAt: number, dataVersion: number): void;
  /** Drops a revoked key (`api-key:<id>`) or every key of a changed account (`account:<id>`), signalled by any process. */
  hear(signal: Signal): void;
}

/** How long a key found in the database is trusted without asking again: the bound when a revocation signal is missed. */
const TRUST_MS = 2000;
const MAX_ENTRIES = 10_000;

/**
 * Authenticated API keys, so that a busy client does not cost a database read
 * per request. Revocation reaches it at once: in this process after the
 * commit; in others through the signal (NOTIFY) on PostgreSQL, and on a SQLite
 * file through `data_version`, which changes with every commit of another
 * process. A missed NOTIFY (a lost listener connection) is bounded by TRUST_MS.
 */
export function createApiKeyCache(): ApiKeyCache {
  const entries = new Map<string, { key: KnownKey; until: number; dataVersion: number }>();
  const hashById = new Map<string, string>();
  let revocations = 0;

  const forget = (id: string) => {
    revocations += 1;
    const hash = hashById.get(id);
    hashById.delete(id);
    if (hash !== undefined) entries.delete(hash);
  };
  const forgetAccount = (accountId: string) => {
    revocations += 1;
    for (const [hash, entry] of entries) {
      if (entry.key.accountId !== accountId) continue;
      entries.delete(hash);
      hashById.delete(entry.key.id);
    }
  };

  return {
    begin: () => revocations,
    get(tokenHash, now, dataVersion) {
      const entry = entries.get(tokenHash);
      if (entry === undefined) return undefined;
      if (entry.until > now && entry.dataVersion === dataVersion) return entry.key;
      entries.delete(tokenHash);
      hashById.delete(entry.key.id);
      return undefined;
    },
    remember(tokenHash, key, now, startedAt, dataVersion) {
      if (startedAt !== revocations) return;
      if (entries.size >= MAX_ENTRIES) {
        const oldest = entries.keys().next().value!;
        hashById.delete(entries.get(oldest)!.key.id);
        entries.delete(oldest);
      }
      entries.set(tokenHash, { key, until: now + TRUST_MS, dataVersion });
      hashById.set(key.id, tokenHash);
    },
    hear(signal) {
      if (signal.startsWith('api-key:')) forget(signal.slice('api-key:'.length));
      else if (signal.startsWith('account:')) forgetAccount(signal.slice('account:'.length));
    },
  };
}
