import type { Account } from '../accounts/accounts.repository.ts';
import type { Signal } from '../shared/signals.ts';

export interface KnownKey {
  id: string;
  accountId: string;
  lastUsedAt: number | null;
  /** The owner's public fields, as read with the key. */
  account: Account;
}

export interface ApiKeyCache {
  /** Starts a lookup; pass the result to `remember`, which ignores it if a key was revoked meanwhile. */
  begin(): number;
  get(tokenHash: string, now: number): KnownKey | undefined;
  remember(tokenHash: string, key: KnownKey, now: number, startedAt: number): void;
  /** Drops a revoked key (`api-key:<id>`) or every key of a changed account (`account:<id>`), signalled by any process. */
  hear(signal: Signal): void;
}

/** How long a key found in the database is trusted without asking again: the bound when a revocation signal is missed. */
const TRUST_MS = 2000;
const MAX_ENTRIES = 10_000;

/**
 * Authenticated API keys, so that a busy client does not cost a database read
 * per request. Revocation reaches it at once: in this process after the
 * commit, in others through the signal (NOTIFY on PostgreSQL); a missed
 * signal (a lost listener connection, several processes on one SQLite file)
 * is bounded by TRUST_MS.
 */
export function createApiKeyCache(): ApiKeyCache {
  const entries = new Map<string, { key: KnownKey; until: number }>();
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
    get(tokenHash, now) {
      const entry = entries.get(tokenHash);
      if (entry === undefined) return undefined;
      if (entry.until > now) return entry.key;
      entries.delete(tokenHash);
      hashById.delete(entry.key.id);
      return undefined;
    },
    remember(tokenHash, key, now, startedAt) {
      if (startedAt !== revocations) return;
      if (entries.size >= MAX_ENTRIES) {
        const oldest = entries.keys().next().value!;
        hashById.delete(entries.get(oldest)!.key.id);
        entries.delete(oldest);
      }
      entries.set(tokenHash, { key, until: now + TRUST_MS });
      hashById.set(key.id, tokenHash);
    },
    hear(signal) {
      if (signal.startsWith('api-key:')) forget(signal.slice('api-key:'.length));
      else if (signal.startsWith('account:')) forgetAccount(signal.slice('account:'.length));
    },
  };
}
