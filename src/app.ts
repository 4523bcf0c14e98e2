import Fastify from 'fastify';
import { pino, type DestinationStream } from 'pino';
import fp from 'fastify-plugin';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { Config } from './config.ts';
import { connectDatabase, dialectOf } from './db/connect.ts';
import { otherProcessesCommits, watchOtherProcessesCommits } from './db/data-version.ts';
import type { DB } from './db/database.ts';
import { migrateToLatest } from './db/migrate.ts';
import { afterResponsePlugin } from './http/after-response.ts';
import { authPlugin } from './http/auth.ts';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandler } from './http/error-handler.ts';
import { registerJsonBodies } from './http/json-body.ts';
import { createUrlRedactor } from './http/request-log.ts';
import { refuseWhileClosing } from './http/shutdown.ts';
import { createValidatorCompiler, refuseUnsafeInput } from './http/validation.ts';
import { createMailer, defaultFromAddress, type Mailer } from './mail/mailer.ts';
import { createMetrics, type Metrics } from './ops/metrics.ts';
import { startMaintenance } from './ops/maintenance.ts';
import { opsRoutes } from './ops/ops.routes.ts';
import { accountsRoutes } from './accounts/accounts.routes.ts';
import { apiKeysRoutes } from './api-keys/api-keys.routes.ts';
import { sessionCookieName } from './accounts/sessions.service.ts';
import { createDeliveryMetrics } from './event-webhooks/delivery.metrics.ts';
import { createDeliveryWorker, DEFAULT_WORKER_OPTIONS, type WorkerOptions } from './event-webhooks/delivery.worker.ts';
import { eventWebhookTools } from './event-webhooks/event-webhooks.mcp.ts';
import { eventWebhooksRoutes } from './event-webhooks/event-webhooks.routes.ts';
import { createSender } from './event-webhooks/sender.ts';
import { listenForSignals } from './db/signal.listener.ts';
import { createSignals } from './shared/signals.ts';
import { createApiKeyCache } from './api-keys/api-key-cache.ts';
import type { ResolveAll } from './event-webhooks/targets.ts';
import { machinesPlugin } from './machines/machines.plugin.ts';
import { LIVE_VIEW_PATH } from './machines/live-view.service.ts';
import { INBOUND_WEBHOOK_PATH } from './runs/inbound-webhooks.service.ts';
import { mcpPlugin } from './mcp/mcp.plugin.ts';
import { dashboardRoutes } from './dashboard/dashboard.routes.ts';
import { createBackgroundTasks } from './shared/background.ts';
import { systemClock, type Clock } from './shared/clock.ts';
import type { Deps } from './shared/deps.ts';

declare module 'fastify' {
  interface FastifyInstance {
    deps: Deps;
    metrics: Metrics;
  }
}

export interface BuildOptions {
  clock?: Clock;
  /** Postgres only: work in this schema (tests use a fresh one per run). */
  databaseSchema?: string;
  mailer?: Mailer;
  /** false: no logs at all (tests). */
  logger?: false;
  /** Where log lines go instead of stdout (tests that read them). */
  logDestination?: DestinationStream;
  workerOptions?: Partial<WorkerOptions>;
  /** Name resolution for webhook targets (tests stand in for DNS, as a hosts file would). */
  resolveAll?: ResolveAll;
}

const BODY_LIMIT_BYTES = 1024 * 1024;
/** How soon a process on a shared SQLite file notices another's commit (an endpoint changed, work queued). */
const OTHER_PROCESSES_WATCH_MS = 25;

/** Capability tokens travel in these URLs (and in emailed links' `?token=`); they must not travel into logs. */
const urlForLog = createUrlRedactor([LIVE_VIEW_PATH, INBOUND_WEBHOOK_PATH]);

/** The composition root: config → database → plugins → domains → routes. */
export async function buildApp(config: Readonly<Config>, options: BuildOptions = {}) {
  // Our own logger rather than Fastify's: Fastify's per-request logging machinery costs tens of
  // microseconds a request even when its level hides every line. One line per request is written below.
  const logLevel = options.logger === false ? 'silent' : config.logLevel;
  const logger = options.logDestination ? pino({ level: logLevel }, options.logDestination) : pino({ level: logLevel });
  const app = Fastify({
    logger: false,
    // Trust only the peer (our proxy): the client is the address it saw, the right-most X-Forwarded-For
    // entry. Trusting every hop takes the left-most entry, which the client writes itself, and with it
    // the client would choose its own rate-limit key. (Fastify refuses a bare hop count, hence the function.)
    trustProxy: config.trustProxy ? (_address: string, hop: number) => hop === 0 : false,
    bodyLimit: BODY_LIMIT_BYTES,
    // refuseWhileClosing answers instead, as problem+json.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors: frameworkErrorHandler(config.publicUrl),
    clientErrorHandler: clientErrorHandler(config.publicUrl),
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  registerJsonBodies(app);
  registerErrorHandler(app, config.publicUrl);
  refuseWhileClosing(app, config.publicUrl);
  app.addHook('preValidation', refuseUnsafeInput);

  const db: Kysely<DB> = connectDatabase(config.databaseUrl, options.databaseSchema ? { schema: options.databaseSchema } : {});
  try {
    await migrateToLatest(db);
  } catch (error) {
    await db.destroy();
    throw error;
  }

  const metrics = createMetrics();
  const workerOptions: WorkerOptions = { ...DEFAULT_WORKER_OPTIONS, ...options.workerOptions };
  const deps: Deps = {
    config,
    db,
    clock: options.clock ?? systemClock,
    mailer: options.mailer ?? createMailer({ smtpUrl: config.smtpUrl, mailDir: config.mailDir, from: defaultFromAddress(config.publicUrl) }),
    background: createBackgroundTasks(logger),
    logger,
    webhooks: {
      sender: createSender(config.webhook, options.resolveAll),
      metrics: createDeliveryMetrics(metrics.registry, db),
      worker: null,
    },
    signals: createSignals(options.databaseSchema),
    apiKeyCache: createApiKeyCache(),
    otherProcessesCommits: otherProcessesCommits(db, config.databaseUrl),
  };

  deps.signals.subscribe(deps.apiKeyCache.hear);

  await app.register(fp(async (core) => {
    core.decorate('deps', deps);
    core.decorate('metrics', metrics);
  }, { name: 'core' }));

  const logRequests = logger.isLevelEnabled('info');
  app.addHook('onResponse', (request, reply, done) => {
    const pattern = request.routeOptions.url;
    const route = pattern ?? 'unmatched';
    const elapsedMs = reply.elapsedTime;
    metrics.observeResponse(request.method, route, reply.statusCode, elapsedMs / 1000);
    if (logRequests) {
      logger.info({ reqId: request.id, method: request.method, route, url: urlForLog(request.url, pattern), statusCode: reply.statusCode, responseTimeMs: Math.round(elapsedMs * 10) / 10 }, 'request completed');
    }
    done();
  });

  await app.register(cookie);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Machine Platform: accounts, authentication and event webhooks', version: '1.0.0' },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key (tmk_…) or, on machine endpoints, machine token (tmm_…)' },
          session: { type: 'apiKey', in: 'cookie', name: sessionCookieName(config) },
        },
      },
      security: [{ bearer: [] }, { session: [] }],
    },
  });
  await app.register(authPlugin);
  await app.register(afterResponsePlugin);

  await app.register(opsRoutes);
  await app.register(mcpPlugin);
  let stopMaintenance = () => {};
  if (config.role !== 'worker') {
    await app.register(accountsRoutes);
    await app.register(apiKeysRoutes);
    await app.register(eventWebhooksRoutes);
    app.platformMcpTools.push(eventWebhookTools);
    await app.register(dashboardRoutes);
    stopMaintenance = startMaintenance(deps);
  }

  let stopListening = async () => {};
  if (config.role !== 'api') {
    const worker = createDeliveryWorker(
      { db, clock: deps.clock, logger, sender: deps.webhooks.sender, metrics: deps.webhooks.metrics, config: config.webhook },
      workerOptions,
    );
    deps.webhooks.worker = worker;
    deps.signals.subscribe(worker.hear);
    app.addHook('onReady', async () => worker.start());
  }
  app.addHook('onReady', async () => {
    if (dialectOf(db) === 'postgres') {
      stopListening = listenForSignals(config.databaseUrl, deps.signals.channel, deps.signals.hear, logger);
    } else {
      // SQLite has no NOTIFY: other processes on the file are noticed by their commits, as `elsewhere`.
      const stopWatching = watchOtherProcessesCommits(db, config.databaseUrl, OTHER_PROCESSES_WATCH_MS, () => deps.signals.hear('elsewhere'));
      stopListening = async () => stopWatching();
    }
  });
  await app.register(machinesPlugin);

  app.get('/api/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () => app.swagger());

  // In this order: finish the attempts in flight and record them, then the rest, the database last.
  app.addHook('onClose', async () => {
    stopMaintenance();
    await stopListening();
    await deps.webhooks.worker?.stop();
    await deps.background.idle();
    deps.mailer.close();
    await deps.webhooks.sender.close();
    await db.destroy();
  });

  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
