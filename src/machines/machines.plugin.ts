import fp from 'fastify-plugin';
import type { MachinesConfig } from '../config.ts';
import { inboundWebhooksRoutes } from '../runs/inbound-webhooks.routes.ts';
import { createRunExecutor, type RunExecutor } from '../runs/run-executor.ts';
import { runsRoutes } from '../runs/runs.routes.ts';
import { schedulesRoutes } from '../runs/schedules.routes.ts';
import { liveViewRoutes } from './live-view.routes.ts';
import { machineMcpRoutes } from './machine-mcp.routes.ts';
import { authenticateMachineToken } from './machine-tokens.ts';
import { machinePlatformTools } from './machines.mcp.ts';
import { machinesRoutes } from './machines.routes.ts';
import { startMachineWorker, type MachineWorker } from './machines.worker.ts';
import { poolsRoutes } from './pools.routes.ts';
import type { MachineProvider } from './provider.ts';
import { createSimulatedProvider } from './simulated.provider.ts';

declare module 'fastify' {
  interface FastifyInstance {
    machineProvider: MachineProvider;
    /** Executes runs in the background, a few at a time; `idle()` waits for them (tests). */
    runExecutor: RunExecutor;
    /** Boots, expiry, schedules, waiting runs and pool refills; `tick()` runs one pass at once. */
    machineWorker: MachineWorker;
  }
}

/** How long shutdown waits for runs still executing. */
const RUN_SHUTDOWN_GRACE_MS = 10_000;

function createProvider(config: Readonly<MachinesConfig>): MachineProvider {
  switch (config.provider) {
    case 'simulated':
      return createSimulatedProvider({ bootMs: config.bootMs });
  }
}

/**
 * Machines, pools, runs, schedules, inbound webhooks, live views and machine
 * tokens. The API role serves the routes; the worker role runs the loop
 * (`all` does both). All state is in the database, so any number of
 * processes can share it and a restart loses nothing.
 */
export const machinesPlugin = fp(
  async (app) => {
    const { deps } = app;
    const provider = createProvider(deps.config.machines);
    app.decorate('machineProvider', provider);
    // In every role: the API role executes the runs its requests queue, the worker role those its schedules and boots release.
    const executor = createRunExecutor(deps, provider);
    app.decorate('runExecutor', executor);
    app.bearerAuthenticators.set('tmm_', authenticateMachineToken);

    if (deps.config.role !== 'worker') {
      await app.register(machinesRoutes);
      await app.register(poolsRoutes);
      await app.register(runsRoutes);
      await app.register(schedulesRoutes);
      await app.register(inboundWebhooksRoutes);
      await app.register(liveViewRoutes);
      await app.register(machineMcpRoutes);
      app.platformMcpTools.push(machinePlatformTools(provider, executor));
    }

    const worker = startMachineWorker(deps, provider, executor, { loop: deps.config.role !== 'api' });
    app.decorate('machineWorker', worker);
    // preClose, not onClose: the pass and the runs must finish while the database is still open. A run still
    // executing after the grace is left to its lease: another process fails it once the lease runs out.
    app.addHook('preClose', async () => {
      await worker.stop();
      await executor.stop(RUN_SHUTDOWN_GRACE_MS);
    });
  },
  { name: 'machines', dependencies: ['core', 'auth', 'mcp'] },
);
