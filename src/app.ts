import Fastify from 'fastify';
import { pino, type DestinationStream } from 'pino';
import fp from 'fastify-plugin';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from './config.ts';
import type { Deps } from './deps.ts';
import { createSealer, loadSecretsKey } from './shared/sealing.ts';
import { connectDatabase } from './db/connect.ts';
import { watchOtherProcessesCommits } from './db/data-version.ts';
import { migrateToLatest } from './db/migrate.ts';
import { authPlugin } from './http/auth.ts';
import { trackConnections } from './http/connections.ts';
import { answerServerLevelRequests, clientErrorHandler, frameworkErrorHandler, registerErrorHandler } from './http/error-handler.ts';
import { registerJsonBodies } from './http/json-body.ts';
import { lingerAfterEarlyAnswers } from './http/lingering-close.ts';
import { createUrlRedactor } from './http/request-log.ts';
import { refuseForeignOriginOnMcp } from './http/origin.ts';
import { refuseUnreadableRequests } from './http/request-guards.ts';
import { refuseWhileClosing } from './http/shutdown.ts';
import { closeAfterRefusedUpgrades } from './http/refused-upgrades.ts';
import { takeHostsFirst } from './http/host-routes.ts';
import { createValidatorCompiler, refuseUnsafeInput } from './http/validation.ts';
import { jobsPlugin } from './jobs/jobs.plugin.ts';
import { createQueue } from './jobs/queue.ts';
import { createRunner, DEFAULT_RUNNER_OPTIONS, type RunnerOptions } from './jobs/runner.ts';
import { mailPlugin } from './mail/mail.plugin.ts';
import type { Mailer } from './mail/mailer.ts';
import { createMetrics, type Metrics } from './ops/metrics.ts';
import { maintenancePlugin } from './ops/maintenance.ts';
import { opsRoutes } from './ops/ops.routes.ts';
import { accountsPlugin } from './accounts/accounts.plugin.ts';
import { apiKeysPlugin } from './api-keys/api-keys.plugin.ts';
import { securityLogPlugin } from './security-log/security-log.plugin.ts';
import { sessionCookieName } from './accounts/sessions.service.ts';
import type { DeliveryOptions } from './event-webhooks/delivery.job.ts';
import { eventWebhooksPlugin } from './event-webhooks/event-webhooks.plugin.ts';
import type { ResolveAll } from './event-webhooks/targets.ts';
import { machinesPlugin } from './machines/machines.plugin.ts';
import type { ImageBuild } from './providers/docker/image-build.ts';
import { runsPlugin } from './runs/runs.plugin.ts';
import { runsFollowMachines } from './runs/follow-machines.ts';
import { machineAccessPlugin } from './machine-access/machine-access.plugin.ts';
import { liveViewsFollowMachines } from './machine-access/live-views.repository.ts';
import { billingPlugin } from './billing/billing.plugin.ts';
import { LIVE_VIEW_PATH } from './machine-access/live-view.service.ts';
import { INBOUND_WEBHOOK_PATH } from './runs/inbound-webhooks.service.ts';
import { mcpPlugin } from './mcp/mcp.plugin.ts';
import type { ToolWaitOptions } from './mcp/tools.ts';
import { oauthPlugin } from './oauth/oauth.plugin.ts';
import { dashboardApiRoutes } from './dashboard/dashboard-api.routes.ts';
import { dashboardRoutes } from './dashboard/dashboard.routes.ts';
import { systemClock, type Clock } from './shared/clock.ts';
import { createSignals } from './db/signals.ts';

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
  /** The job runner's poll interval (tests of several processes shorten it). */
  runnerOptions?: Partial<RunnerOptions>;
  /** Tuning of webhook delivery lanes. */
  deliveryOptions?: Partial<DeliveryOptions>;
  /** Name resolution for webhook targets (tests stand in for DNS, as a hosts file would). */
  resolveAll?: ResolveAll;
  /** How long MCP tools wait before answering, and how often they report progress (tests shorten both). */
  toolWait?: Partial<ToolWaitOptions>;
  /** How long a terminal outlives its page (tests shorten it). */
  terminalGraceMs?: number;
  /** How MACHINE_PROVIDER=auto builds a missing machine image (tests stand in for `npm run machine-image`). */
  machineImageBuild?: ImageBuild;
}

const BODY_LIMIT_BYTES = 1024 * 1024;
/** How soon a process on a shared SQLite file notices another's commit (an endpoint changed, work queued). */
const OTHER_PROCESSES_WATCH_MS = 25;
/** Past the jobs runner's grace, what a close hook gets (its settlements, closing the database) before shutdown is called failed. */
const CLOSE_HOOK_MARGIN_MS = 10_000;
/**
 * What a plugin's start-up gets at least. The machines plugin's start talks to the Docker engine (networks, the
 * agent's volume, the firewall and resolver containers, a disk-limit probe): a few seconds on a quiet host, but
 * tens of seconds on one whose engine is busy creating and removing containers, where 20 s refused to start.
 */
const PLUGIN_START_MS = 120_000;

/** Capability tokens travel in these URLs (and in emailed links' `?token=`); they must not travel into logs. */
const urlForLog = createUrlRedactor([LIVE_VIEW_PATH, INBOUND_WEBHOOK_PATH]);

/** The composition root: config → database → plugins → domains → routes. */
export async function buildApp(config: Readonly<Config>, options: BuildOptions = {}) {
  // Our own logger rather than Fastify's: Fastify's per-request logging machinery costs tens of
  // microseconds a request even when its level hides every line. One line per request is written below.
  const logLevel = options.logger === false ? 'silent' : config.logLevel;
  const logger = options.logDestination ? pino({ level: logLevel }, options.logDestination) : pino({ level: logLevel });
  const connections = trackConnections();
  const app = Fastify({
    logger: false,
    // Trust only the peer (our proxy): the client is the address it saw, the right-most X-Forwarded-For
    // entry. Trusting every hop takes the left-most entry, which the client writes itself, and with it
    // the client would choose its own rate-limit key. (Fastify refuses a bare hop count, hence the function.)
    trustProxy: config.trustProxy ? (_address: string, hop: number) => hop === 0 : false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Also bounds each close hook: the jobs runner's stop may take the whole grace (a webhook attempt's timeout) and its
    // settlement. A bound, not a wait: a start-up or close that finishes sooner is not held.
    pluginTimeout: Math.max(config.webhook.timeoutMs + CLOSE_HOOK_MARGIN_MS, PLUGIN_START_MS),
    // refuseWhileClosing answers instead, as problem+json.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors: frameworkErrorHandler(config.publicUrl, connections),
    clientErrorHandler: clientErrorHandler(config.publicUrl, connections),
    // Node would answer a request without Host itself, with an empty 400; refuseUnreadableRequests answers it as problem+json.
    http: { requireHostHeader: false },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // First of all: a preview host never meets the API's and the dashboard's hooks.
  takeHostsFirst(app);
  connections.watch(app.server);
  answerServerLevelRequests(app.server, config.publicUrl);
  lingerAfterEarlyAnswers(app.server);

  app.setValidatorCompiler(createValidatorCompiler());
  registerJsonBodies(app);
  registerErrorHandler(app, config.publicUrl);
  refuseWhileClosing(app, config.publicUrl, connections);
  closeAfterRefusedUpgrades(app, connections);
  app.addHook('onRequest', refuseUnreadableRequests(config.publicUrl));
  // Before authentication (the auth plugin's hook), so that it holds whatever the credential.
  app.addHook('onRequest', refuseForeignOriginOnMcp(config.publicUrl));
  app.addHook('preValidation', refuseUnsafeInput);

  const database = connectDatabase(config.databaseUrl, {
    ...(options.databaseSchema ? { schema: options.databaseSchema } : {}),
    preparedStatements: config.performance.pgPreparedStatements,
  });
  const { db } = database;
  try {
    await migrateToLatest(db);
  } catch (error) {
    await database.destroy();
    throw error;
  }

  const metrics = createMetrics();
  const clock = options.clock ?? systemClock;
  const signals = createSignals(options.databaseSchema);
  // ROLE=api runs no jobs: what it enqueues waits for a worker process.
  const runner =
    config.role === 'api'
      ? null
      : createRunner({ database, db, clock, logger }, { ...DEFAULT_RUNNER_OPTIONS, pollIntervalMs: config.jobs.pollIntervalMs, ...options.runnerOptions });
  const deps: Deps = Object.freeze({ config, database, db, clock, logger, signals, jobs: createQueue({ db, clock, signals, runner }), secrets: createSealer(loadSecretsKey(config.secrets)), machineFollowers: [runsFollowMachines, liveViewsFollowMachines] });

  // The database goes last: Fastify runs onClose hooks in the reverse order they were added, and each plugin
  // registered below adds its own (what it still writes as it closes, such as machines' held activity) before this
  // function's end.
  let stopListening = async () => {};
  app.addHook('onClose', async () => {
    await stopListening();
    await database.destroy();
  });

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
      info: { title: 'Machine Platform: a cloud of machines for AI agents, with accounts, API keys, signed webhooks and billing', version: '1.0.0' },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key (tmk_…); on machine endpoints, machine token (tmm_…); on /api/mcp, OAuth access token (tmo_…)' },
          session: { type: 'apiKey', in: 'cookie', name: sessionCookieName(config) },
        },
      },
      security: [{ bearer: [] }, { session: [] }],
    },
  });
  // Attempts in flight get at most the webhook timeout to finish when the process stops (each job kind bounds its own).
  await app.register(jobsPlugin, { runner, stopGraceMs: config.webhook.timeoutMs });
  await app.register(mailPlugin, options.mailer ? { mailer: options.mailer } : {});
  await app.register(authPlugin);
  await app.register(opsRoutes);
  await app.register(mcpPlugin);
  await app.register(maintenancePlugin);
  await app.register(accountsPlugin);
  await app.register(apiKeysPlugin);
  await app.register(securityLogPlugin);
  await app.register(eventWebhooksPlugin, { ...(options.deliveryOptions ? { delivery: options.deliveryOptions } : {}), ...(options.resolveAll ? { resolveAll: options.resolveAll } : {}) });
  await app.register(machinesPlugin, options.machineImageBuild ? { imageBuild: options.machineImageBuild } : {});
  await app.register(runsPlugin);
  await app.register(machineAccessPlugin, { ...(options.toolWait ? { toolWait: options.toolWait } : {}), ...(options.terminalGraceMs !== undefined ? { terminalGraceMs: options.terminalGraceMs } : {}) });
  await app.register(billingPlugin);
  await app.register(oauthPlugin, options.resolveAll ? { resolveAll: options.resolveAll } : {});
  if (config.role !== 'worker') {
    await app.register(dashboardApiRoutes);
    await app.register(dashboardRoutes);
  }

  app.addHook('onReady', async () => {
    if (database.engine === 'postgres') {
      // Loaded here: it loads pg, which a SQLite service never needs (issue 42).
      const { listenForSignals } = await import('./db/signal.listener.ts');
      stopListening = listenForSignals(config.databaseUrl, signals.channel, signals.hear, logger);
    } else {
      // SQLite has no NOTIFY: other processes on the file are noticed by their commits, as `elsewhere`.
      const stopWatching = watchOtherProcessesCommits(database, OTHER_PROCESSES_WATCH_MS, () => signals.hear('elsewhere'));
      stopListening = async () => stopWatching();
    }
  });

  app.get('/api/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () => app.swagger());

  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
