import fp from 'fastify-plugin';
import { idBoundAt } from '../shared/ids.ts';
import { deleteExpiredReceipts } from './inbound-webhooks.repository.ts';
import { inboundWebhooksRoutes } from './inbound-webhooks.routes.ts';
import { runJobKinds } from './runs.jobs.ts';
import { deleteFinishedRuns, finishedRunIdsBefore } from './runs.repository.ts';
import { runsRoutes } from './runs.routes.ts';
import { schedulesRoutes } from './schedules.routes.ts';

/** Runs, schedules and inbound webhooks: commands on machines, now, on a schedule, or when a webhook comes in. */
export const runsPlugin = fp(
  async (app) => {
    const { deps } = app;
    for (const kind of runJobKinds(deps, app.machineProvider)) app.jobs.register(kind);
    app.maintenance.add('expired inbound-webhook receipts', (now) => deleteExpiredReceipts(deps.db, now));
    app.retention.addKeyed('runs', ({ cutoff }, after, limit) => finishedRunIdsBefore(deps.db, idBoundAt('run', cutoff), after, limit), (_context, ids) => deleteFinishedRuns(deps.db, ids));

    if (deps.config.role === 'worker') return;
    await app.register(runsRoutes);
    await app.register(schedulesRoutes);
    await app.register(inboundWebhooksRoutes);
  },
  { name: 'runs', dependencies: ['machines'] },
);
