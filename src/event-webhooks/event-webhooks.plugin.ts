import fp from 'fastify-plugin';
import { deleteEventsWithoutDeliveries, eventIdsBefore } from '../events/events.repository.ts';
import { idBoundAt } from '../shared/ids.ts';
import { deleteFinishedDeliveries, finishedDeliveryIdsBefore } from './deliveries.repository.ts';
import { otherProcessesCommits } from '../db/data-version.ts';
import type { WebhookConfig } from '../config.ts';
import { createDeliveryMetrics } from './delivery.metrics.ts';
import { createDeliveryKind, DEFAULT_DELIVERY_OPTIONS, deliveryJob, type DeliveryOptions } from './delivery.job.ts';
import { eventWebhookTools } from './event-webhooks.mcp.ts';
import { eventWebhooksRoutes } from './event-webhooks.routes.ts';
import { endpointHealthMailKinds, healthCheck } from './health.job.ts';
import { historyRoutes } from './history.routes.ts';
import { feedKind } from './recovery.job.ts';
import { createThreadSender } from './thread-sender.ts';
import type { ResolveAll } from './targets.ts';

export interface EventWebhooksOptions {
  /** Tuning of the delivery lanes (tests shorten the probe interval, say). */
  delivery?: Partial<DeliveryOptions>;
  /** Name resolution for webhook targets (tests stand in for DNS, as a hosts file would). */
  resolveAll?: ResolveAll;
}

/**
 * Event webhooks: endpoints, deliveries and their job. Every role runs
 * deliveries whose job this process takes (ROLE=api takes none); the routes
 * and MCP tools are served where the role serves the API.
 */
export const eventWebhooksPlugin = fp<EventWebhooksOptions>(
  async (app, options) => {
    const { deps } = app;
    const config: WebhookConfig = deps.config.webhook;
    // A resolver given in code is a function, which cannot cross to another thread: its attempts stay on this one.
    // The thread starts with the first attempt: most processes make none for a long while, if ever, and an idle
    // thread holds about 35 MB (issue 42); the first attempt waits for it to start, tens of milliseconds.
    // sender.ts (and undici with it) is loaded only where attempts are made on this thread.
    const sender = deps.config.performance.webhookSenderThread && options.resolveAll === undefined
      ? createThreadSender(config, deps.logger, { startNow: false })
      : (await import('./sender.ts')).createSender(config, options.resolveAll);
    const metrics = createDeliveryMetrics(app.metrics.registry, () => deps.jobs.count(deliveryJob));
    const kind = createDeliveryKind(
      {
        db: deps.db,
        clock: deps.clock,
        logger: deps.logger,
        sender,
        metrics,
        config,
        otherProcessesCommits: otherProcessesCommits(deps.database),
      },
      { ...DEFAULT_DELIVERY_OPTIONS, ...options.delivery },
    );
    app.jobs.registerLaned(kind);
    app.jobs.register(feedKind(deps));
    app.jobs.recur(healthCheck(deps));
    for (const mailKind of endpointHealthMailKinds(deps, app.mailer)) app.jobs.register(mailKind);
    // Retention: finished deliveries (with their attempt logs), then the events no pending delivery carries.
    app.retention.add('deliveries', async ({ cutoff }, after, limit) => {
      const ids = await finishedDeliveryIdsBefore(deps.db, idBoundAt('dlv', cutoff), after, limit);
      const deleted = await deleteFinishedDeliveries(deps.database, ids);
      return { deleted: { deliveries: deleted.deliveries, delivery_attempts: deleted.attempts }, cursor: ids.length < limit ? null : ids.at(-1)! };
    });
    app.retention.addKeyed('events', ({ cutoff }, after, limit) => eventIdsBefore(deps.db, idBoundAt('evt', cutoff), after, limit), (_context, ids) => deleteEventsWithoutDeliveries(deps.db, ids));
    deps.signals.subscribe(kind.hear);
    app.addHook('onClose', async () => sender.close());

    if (deps.config.role === 'worker') return;
    await app.register(eventWebhooksRoutes, { testSending: { sender, metrics } });
    await app.register(historyRoutes);
    app.platformMcpTools.push(eventWebhookTools({ sender, metrics }));
  },
  { name: 'event-webhooks', dependencies: ['core', 'jobs', 'mcp', 'mail', 'maintenance'] },
);
