import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { rateLimited } from '../http/errors.ts';

export interface Limit {
  max: number;
  windowMs: number;
}

export interface LimitCheck {
  key: string;
  limit: Limit;
}

export interface HitResult {
  allowed: boolean;
  retryAfterSeconds: number;
}

/**
 * Counts one hit against a fixed window that starts at the key's first hit.
 * One atomic upsert, so the count holds across processes sharing the database.
 */
export async function hit(db: Kysely<DB>, check: LimitCheck, now: number): Promise<HitResult> {
  const expiredBefore = now - check.limit.windowMs;
  const row = await db
    .insertInto('rate_limits')
    .values({ key: check.key, window_started_at: now, hits: 1 })
    .onConflict((conflict) =>
      conflict.column('key').doUpdateSet({
        hits: sql<number>`case when rate_limits.window_started_at <= ${expiredBefore} then 1 else rate_limits.hits + 1 end`,
        window_started_at: sql<number>`case when rate_limits.window_started_at <= ${expiredBefore} then ${now} else rate_limits.window_started_at end`,
      }),
    )
    .returning(['hits', 'window_started_at'])
    .executeTakeFirstOrThrow();
  const allowed = row.hits <= check.limit.max;
  const retryAfterMs = row.window_started_at + check.limit.windowMs - now;
  return { allowed, retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil(retryAfterMs / 1000)) };
}

/**
 * Counts a hit on each key in order, and stops at the first that refuses:
 * the keys after it are not counted. Callers put the client's address first,
 * so a client over its address's limit cannot add a counter per email it
 * makes up (issue 38: each new email was a new row, without bound).
 * @throws AppError 429 with Retry-After when a limit is exceeded.
 */
export async function enforceLimits(db: Kysely<DB>, checks: readonly LimitCheck[], now: number): Promise<void> {
  for (const check of checks) {
    const result = await hit(db, check, now);
    if (!result.allowed) throw rateLimited(result.retryAfterSeconds);
  }
}

/** Like enforce, but reports instead of throwing: for answers that must not reveal the limit. Stops at the first refusal too. */
export async function allows(db: Kysely<DB>, checks: readonly LimitCheck[], now: number): Promise<boolean> {
  for (const check of checks) if (!(await hit(db, check, now)).allowed) return false;
  return true;
}

/** Keys of counters whose window started before `olderThan`, after `after`, in key order: a batch for retention. */
export async function expiredWindowKeys(db: Kysely<DB>, olderThan: number, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('rate_limits').select('key').where('window_started_at', '<', olderThan);
  if (after !== undefined) query = query.where('key', '>', after);
  return (await query.orderBy('key').limit(limit).execute()).map((row) => row.key);
}

/** Deletes these counters if their window still started before `olderThan` (one restarted meanwhile stays); answers how many. */
export async function deleteExpiredWindows(db: Kysely<DB>, olderThan: number, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0;
  const result = await db.deleteFrom('rate_limits').where('key', 'in', keys).where('window_started_at', '<', olderThan).executeTakeFirst();
  return Number(result.numDeletedRows);
}
