import { monotonicFactory } from 'ulid';

export type IdPrefix = 'acct' | 'ses' | 'key' | 'ep' | 'evt' | 'dlv' | 'mch' | 'run' | 'sch' | 'ihk' | 'pool';

const nextUlid = monotonicFactory();

/**
 * `<prefix>_<ulid>`, lower-cased: time-sortable, and monotonic within one process,
 * so ordering by id is ordering by creation.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${nextUlid(now).toLowerCase()}`;
}

