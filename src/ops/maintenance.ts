import fp from 'fastify-plugin';
import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType, type JobKind } from '../jobs/job-kind.ts';
import { deleteExpiredWindows, expiredWindowKeys } from '../rate-limits/rate-limiter.ts';
import { createRetention, retentionInterval, retentionJob } from './retention.ts';
import { DAY, MINUTE, SECOND } from '../shared/clock.ts';

/** One pass over every domain's cleanup, once a minute, in whichever process takes the job. */
export const maintenanceJob = jobType<Record<string, never>>('maintenance');

/** A domain's cleanup: deletes what can no longer matter as of `now`. */
export type CleanupTask = (now: number) => Promise<void>;

export interface Maintenance {
  /** Domains add their cleanup (expired sessions, spent links, expired live views…) when they register. */
  add(name: string, task: CleanupTask): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    maintenance: Maintenance;
  }
}

const INTERVAL_MS = MINUTE;
/** Longer than the longest rate-limit window. */
const RATE_LIMIT_RETENTION_MS = DAY;

function maintenanceKind(deps: Deps, tasks: Map<string, CleanupTask>): JobKind<Record<string, never>> {
  return {
    type: maintenanceJob,
    concurrency: 1,
    leaseMs: 5 * MINUTE,
    retryDelay: exponentialBackoff({ firstMs: 10 * SECOND, maxMs: INTERVAL_MS, attempts: Infinity }),
    async perform() {
      const now = deps.clock.now();
      // Each task on its own: one that fails is logged and tried again next time, without holding up the others.
      for (const [name, task] of tasks) {
        try {
          await task(now);
        } catch (err) {
          deps.logger.error({ err, task: name }, 'a cleanup task failed; it runs again next time');
        }
      }
      return { status: 'later', at: deps.clock.now() + INTERVAL_MS };
    },
  };
}

/** The recurring maintenance job: one for all processes, made sure of at start; domains add their cleanup to it. */
export const maintenancePlugin = fp(
  async (app) => {
    const { deps } = app;
    const tasks = new Map<string, CleanupTask>();
    app.decorate('maintenance', { add: (name: string, task: CleanupTask) => void tasks.set(name, task) } satisfies Maintenance);
    app.jobs.register(maintenanceKind(deps, tasks));
    const { kind: retentionKind, retention } = createRetention(deps, app.metrics.registry);
    app.decorate('retention', retention);
    app.jobs.register(retentionKind);
    app.retention.addKeyed(
      'rate_limits',
      ({ now }, after, limit) => expiredWindowKeys(deps.db, now - RATE_LIMIT_RETENTION_MS, after, limit),
      ({ now }, keys) => deleteExpiredWindows(deps.db, now - RATE_LIMIT_RETENTION_MS, keys),
    );
    app.addHook('onReady', async () => {
      await inTransaction(deps.db, async (tx) => {
        await deps.jobs.ensure(tx, maintenanceJob, 'all', {}, deps.clock.now() + INTERVAL_MS);
        await deps.jobs.ensure(tx, retentionJob, 'all', {}, deps.clock.now() + retentionInterval(deps));
      });
    });
  },
  { name: 'maintenance', dependencies: ['core', 'jobs'] },
);
