import fp from 'fastify-plugin';
import type { Deps } from '../deps.ts';
import { jobType } from '../jobs/job-kind.ts';
import type { Recurring } from '../jobs/recurring.ts';
import { deleteExpiredWindows, expiredWindowKeys } from '../rate-limits/rate-limiter.ts';
import { createRetention } from './retention.ts';
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

/** Longer than the longest rate-limit window. */
const RATE_LIMIT_RETENTION_MS = DAY;

function maintenance(deps: Deps, tasks: Map<string, CleanupTask>): Recurring {
  return {
    type: maintenanceJob,
    intervalMs: MINUTE,
    firstRetryMs: 10 * SECOND,
    async run() {
      const now = deps.clock.now();
      // Each task on its own: one that fails is logged and tried again next time, without holding up the others.
      for (const [name, task] of tasks) {
        try {
          await task(now);
        } catch (err) {
          deps.logger.error({ err, task: name }, 'a cleanup task failed; it runs again next time');
        }
      }
    },
  };
}

/** The recurring maintenance job: one for all processes, made sure of at start; domains add their cleanup to it. */
export const maintenancePlugin = fp(
  async (app) => {
    const { deps } = app;
    const tasks = new Map<string, CleanupTask>();
    app.decorate('maintenance', { add: (name: string, task: CleanupTask) => void tasks.set(name, task) } satisfies Maintenance);
    app.jobs.recur(maintenance(deps, tasks));
    const { recurring: pruning, retention } = createRetention(deps, app.metrics.registry);
    app.decorate('retention', retention);
    app.jobs.recur(pruning);
    app.retention.addKeyed(
      'rate_limits',
      ({ now }, after, limit) => expiredWindowKeys(deps.db, now - RATE_LIMIT_RETENTION_MS, after, limit),
      ({ now }, keys) => deleteExpiredWindows(deps.db, now - RATE_LIMIT_RETENTION_MS, keys),
    );
  },
  { name: 'maintenance', dependencies: ['core', 'jobs'] },
);
