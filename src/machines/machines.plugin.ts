import fp from 'fastify-plugin';
import type { MachinesConfig } from '../config.ts';
import { inboundWebhooksRoutes } from '../runs/inbound-webhooks.routes.ts';
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
    /** Boots, expiry, schedules, waiting runs and pool refills; `tick()` runs one pass at once. */
    machineWorker: MachineWorker;
  }
}

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
    app.bearerAuthenticators.set('tmm_', authenticateMachineToken);

    if (deps.config.role !== 'worker') {
      await app.register(machinesRoutes);
      await app.register(poolsRoutes);
      await app.register(runsRoutes);
      await app.register(schedulesRoutes);
      await app.register(inboundWebhooksRoutes);
      await app.register(liveViewRoutes);
      await app.register(machineMcpRoutes);
      app.platformMcpTools.push(machinePlatformTools(provider));
    }

    const worker = startMachineWorker(deps, provider, { loop: deps.config.role !== 'api' });
    app.decorate('machineWorker', worker);
    // preClose, not onClose: the pass must finish while the database is still open.
    app.addHook('preClose', async () => worker.stop());
  },
  { name: 'machines', dependencies: ['core', 'auth', 'mcp'] },
);
