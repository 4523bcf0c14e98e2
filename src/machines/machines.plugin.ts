import websocket from '@fastify/websocket';
import fp from 'fastify-plugin';
import { idBoundAt } from '../shared/ids.ts';
import { deleteFinishedRuns, finishedRunIdsBefore } from './runs.repository.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { MachinesConfig } from '../config.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import type { Clock } from '../shared/clock.ts';
import type { Sealer } from '../shared/sealing.ts';
import { DEFAULT_TOOL_WAIT, type ToolWaitOptions } from '../mcp/tools.ts';
import { machineCheckJob } from './job-types.ts';
import { createMachineActivity, recordRequestActivity, type MachineActivity } from './activity.ts';
import { findMachineById } from './machines.repository.ts';
import { deleteExpiredReceipts } from './inbound-webhooks.repository.ts';
import { inboundWebhooksRoutes } from './inbound-webhooks.routes.ts';
import { deleteExpiredLiveViews } from './live-views.repository.ts';
import { liveViewRoutes } from './live-view.routes.ts';
import { machineAccessRoutes } from './machine-access.routes.ts';
import { machineMetricsRoutes } from './machine-metrics.routes.ts';
import { machineMcpRoutes } from './machine-mcp.routes.ts';
import { authenticateMachineToken } from './machine-tokens.ts';
import { machineJobKinds } from './machines.jobs.ts';
import { machinePlatformTools } from './machines.mcp.ts';
import { machinesRoutes } from './machines.routes.ts';
import { poolsRoutes } from './pools.routes.ts';
import type { MachineProvider } from './provider.ts';
import { runsRoutes } from './runs.routes.ts';
import { schedulesRoutes } from './schedules.routes.ts';
import { templatesRoutes } from './templates.routes.ts';
import { terminalRoutes } from './terminal.routes.ts';
import { createSimulatedProvider } from './simulated.provider.ts';
import { previewPlatformTools, registerPreviewTools } from './previews/preview-tools.ts';
import { previewsRoutes } from './previews/previews.routes.ts';
import { createPreviews } from './previews/previews.service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    machineProvider: MachineProvider;
    /** Records what keeps machines awake (activity.ts). */
    machineActivity: MachineActivity;
  }
}

async function createProvider(config: Readonly<MachinesConfig>, clock: Clock, logger: FastifyBaseLogger, secrets: Sealer): Promise<MachineProvider> {
  switch (config.provider) {
    case 'simulated':
      return createSimulatedProvider({ bootMs: config.bootMs, clock, sizes: Object.keys(config.sizes) });
    case 'docker': {
      // Loaded only where machines are Docker's: dockerode and its dependencies weigh some 30 MB of memory.
      const { createDockerProvider } = await import('./docker/docker.provider.ts');
      return createDockerProvider(config, logger, secrets);
    }
  }
}

/** A machine the host says changed on its own is checked now, if it is one the service believes up. */
async function checkNow(deps: Deps, machineId: string): Promise<void> {
  const machine = await findMachineById(deps.db, machineId);
  if (machine?.status !== 'running' && machine?.status !== 'starting' && machine?.status !== 'paused') return;
  await inTransaction(deps.database, (tx) => deps.jobs.schedule(tx, machineCheckJob, machineId, { machineId }, deps.clock.now()));
}

/**
 * Machines, pools, runs, schedules, inbound webhooks, live views and machine
 * tokens. Routes where the role serves the API; their background work
 * (checks, expiry, refills, ticks, runs) is jobs, run by whichever process
 * takes them. All state is in the database, so any number of processes can
 * share it and a restart loses nothing.
 */
export const machinesPlugin = fp<{ toolWait?: Partial<ToolWaitOptions>; terminalGraceMs?: number }>(
  async (app, options) => {
    const { deps } = app;
    const toolWait = Object.freeze({ ...DEFAULT_TOOL_WAIT, ...options.toolWait });
    const provider = await createProvider(deps.config.machines, deps.clock, deps.logger, deps.secrets);
    await provider.start?.();
    app.decorate('machineProvider', provider);
    if (deps.config.role !== 'api' && provider.watch) {
      const unwatch = provider.watch((machineId) => {
        checkNow(deps, machineId).catch((err: unknown) => deps.logger.error({ err, machineId }, 'could not schedule the check of a machine the host reported'));
      });
      app.addHook('preClose', async () => unwatch());
    }
    app.credentials.bearer('tmm_', authenticateMachineToken);
    for (const kind of machineJobKinds(deps, provider)) app.jobs.register(kind);
    app.maintenance.add('expired live views', (now) => deleteExpiredLiveViews(deps.db, now));
    app.maintenance.add('expired inbound-webhook receipts', (now) => deleteExpiredReceipts(deps.db, now));
    app.retention.addKeyed('runs', ({ cutoff }, after, limit) => finishedRunIdsBefore(deps.db, idBoundAt('run', cutoff), after, limit), (_context, ids) => deleteFinishedRuns(deps.db, ids));

    if (deps.config.role === 'worker') return;
    const activity = createMachineActivity(deps);
    app.decorate('machineActivity', activity);
    app.addHook('onClose', () => activity.flush());
    // Before the routes: the hook applies to the routes registered after it.
    recordRequestActivity(app, activity);
    await app.register(machinesRoutes);
    await app.register(poolsRoutes);
    await app.register(templatesRoutes);
    await app.register(runsRoutes);
    await app.register(schedulesRoutes);
    await app.register(inboundWebhooksRoutes);
    // WebSockets: live views' streams, control of a screen, terminals.
    await app.register(websocket, { options: { maxPayload: 1024 * 1024 } });
    await app.register(liveViewRoutes);
    await app.register(terminalRoutes, options.terminalGraceMs !== undefined ? { graceMs: options.terminalGraceMs } : {});
    await app.register(machineAccessRoutes);
    await app.register(machineMetricsRoutes);
    const previews = createPreviews(deps, activity);
    await app.register(previewsRoutes, { previews });
    // A provider that reaches no port inside machines (the simulated one) serves no previews: no tools to offer them.
    const servesPreviews = provider.connectPort !== undefined;
    await app.register(machineMcpRoutes, { toolWait, moreTools: servesPreviews ? [(server, context) => registerPreviewTools(server, context, previews)] : [] });
    app.platformMcpTools.push(machinePlatformTools(provider, toolWait));
    if (servesPreviews) app.platformMcpTools.push(previewPlatformTools(previews));
  },
  { name: 'machines', dependencies: ['core', 'auth', 'jobs', 'mcp', 'maintenance'] },
);
