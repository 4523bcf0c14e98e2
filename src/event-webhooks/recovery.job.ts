import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType, type JobKind } from '../jobs/job-kind.ts';
import { MINUTE, SECOND } from '../shared/clock.ts';
import { findUnqueued, markQueued } from './deliveries.repository.ts';
import { deliveryJob } from './delivery.job.ts';

/**
 * The feeder: hands recovered and replayed deliveries (pending, not yet
 * queued) to their endpoint's lane in batches, a batch whenever the lane has
 * fewer than a batch waiting, so that a window of a million neither sits in
 * memory nor floods the receiver: the lane's own limits pace the sending.
 * Every transaction of a recover or replay that adds deliveries enqueues one,
 * so each delivery added has a feeder that starts after it exists; feeders
 * of one endpoint share the work (each batch is claimed with its rows
 * locked, SKIP LOCKED on PostgreSQL; SQLite writers take turns), and one
 * that finds nothing left ends.
 */
export const feedJob = jobType<{ endpointId: string }>('webhook.feed');

export const FEED_BATCH = 500;
/** How soon a feeder looks again at a lane that is still full (or paused). */
const FULL_LANE_WAIT_MS = 2 * SECOND;

export function feedKind(deps: Deps): JobKind<{ endpointId: string }> {
  return {
    type: feedJob,
    concurrency: 2,
    retryDelay: exponentialBackoff({ firstMs: 5 * SECOND, maxMs: MINUTE, attempts: Infinity }),
    async perform({ payload: { endpointId } }) {
      if ((await deps.jobs.countInLane(endpointId, FEED_BATCH)) >= FEED_BATCH) return { status: 'later', at: deps.clock.now() + FULL_LANE_WAIT_MS };
      const handed = await inTransaction(deps.database, async (tx) => {
        const batch = await findUnqueued(tx.db, endpointId, FEED_BATCH);
        const now = deps.clock.now();
        await markQueued(tx.db, batch.map((d) => d.deliveryId), now);
        await deps.jobs.enqueueInLane(tx, deliveryJob, batch.map((work) => ({ id: work.deliveryId, payload: {}, lane: endpointId, work })));
        return batch.length;
      });
      // A full batch: there may be more; the lane's backlog decides when.
      return handed === FEED_BATCH ? { status: 'later', at: deps.clock.now() } : { status: 'done' };
    },
  };
}
