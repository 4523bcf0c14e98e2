import { randomFillSync } from 'node:crypto';
import { decodeTime, encodeTime, monotonicFactory } from 'ulid';

export type IdPrefix = 'acct' | 'ses' | 'job' | 'proc' | 'key' | 'ep' | 'evt' | 'dlv' | 'mch' | 'run' | 'sch' | 'ihk' | 'pool' | 'txn' | 'grt' | 'pk' | 'sec' | 'tpl';

// ulid asks for one random byte per character; one call to the system's CSPRNG per 4 KiB is enough.
const pool = new Uint8Array(4096);
let poolUsed = pool.length;
function pooledRandom(): number {
  if (poolUsed === pool.length) {
    randomFillSync(pool);
    poolUsed = 0;
  }
  return pool[poolUsed++]! / 256;
}

const nextUlid = monotonicFactory(pooledRandom);

/**
 * `<prefix>_<ulid>`, lower-cased: time-sortable, and monotonic within one process,
 * so ordering by id is ordering by creation.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${nextUlid(now).toLowerCase()}`;
}

/** The pattern every id of this prefix matches (`newId` writes them), for validating ids given as filters. */
export function idPattern(prefix: IdPrefix): string {
  return `^${prefix}_[0-9a-z]{26}$`;
}

/**
 * A new id that sorts after `after` (an id of the same prefix, or none), even
 * if `after` was made by another process whose clock was ahead or whose time
 * was taken later: what a sequence ordered by id, and extended under a lock by
 * several processes, needs.
 */
export function newIdAfter(prefix: IdPrefix, now: number, after: string | undefined): string {
  const id = newId(prefix, now);
  if (after === undefined || id > after) return id;
  return newId(prefix, decodeTime(after.slice(prefix.length + 1).toUpperCase()) + 1);
}

/**
 * The smallest id with this prefix made at `at` or later: every id made
 * earlier sorts before it, every id made at `at` or later after it (ids are
 * lower-cased ULIDs, their first ten characters the time).
 */
export function idBoundAt(prefix: IdPrefix, at: number): string {
  return `${prefix}_${encodeTime(Math.max(0, Math.floor(at)), 10).toLowerCase()}0000000000000000`;
}
