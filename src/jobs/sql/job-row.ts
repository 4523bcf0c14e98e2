import type { Job } from '../job-kind.ts';
import type { JobsTable } from '../jobs.tables.ts';

/** The columns a claim reads: everything but bookkeeping. */
export const CLAIMED_COLUMNS = ['id', 'kind', 'lane', 'key', 'payload', 'attempts', 'run_at', 'locked_until'] as const;

export type ClaimedRow = Pick<JobsTable, (typeof CLAIMED_COLUMNS)[number]>;

export function toJob<Payload>(row: ClaimedRow): Job<Payload> {
  return {
    id: row.id,
    kind: row.kind,
    lane: row.lane,
    key: row.key,
    payload: JSON.parse(row.payload) as Payload,
    attempts: row.attempts,
    runAt: row.run_at,
    leaseUntil: row.locked_until!,
  };
}
