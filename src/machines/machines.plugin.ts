import fp from 'fastify-plugin';
import type { FastifyBaseLogger } from 'fastify';
import type { MachinesConfig } from '../config.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import type { Clock } from '../shared/clock.ts';
import type { Sealer } from '../shared/sealing.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { createSimulatedProvider } from '../providers/simulated.provider.ts';
import { machineCheckJob } from './job-types.ts';
import { createMachineActivity, recordRequestActivity, type MachineActivity } from './activity.ts';
import { findMachineById } from './machines.repository.ts';
import { authenticateMachineToken } from './machine-tokens.ts';
import { machineJobKinds } from './machines.jobs.ts';
import { machinesRoutes } from './machines.routes.ts';
import { poolsRoutes } from './pools.routes.ts';
import { templatesRoutes } from './templates.routes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    machineProvider: MachineProvider;
    /** Records what keeps machines awake (activity.ts); absent where the role serves no API. */
    machineActivity: MachineActivity;
  }
}

async function createProvider(config: Readonly<MachinesConfig>, clock: Clock, logger: FastifyBaseLogger, secrets: Sealer): Promise<MachineProvider> {
  switch (config.provider) {
    case 'simulated':
      return createSimulatedProvider({ bootMs: config.bootMs, clock, sizes: Object.keys(config.sizes) });
    case 'docker': {
      // Loaded only where machines are Docker's: dockerode and its dependencies weigh some 30 MB of memory.
      const { createDockerProvider } = await import('../providers/docker/docker.provider.ts');
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
 * Machines' lifecycle: the provider (the host), machines, pools, templates
 * and machine tokens. Routes where the role serves the API; background work
 * (checks, expiry, idle stops, refills) is jobs, run by whichever process
 * takes them. All state is in the database, so any number of processes can
 * share it and a restart loses nothing. runs.plugin.ts and
 * machine-access.plugin.ts build on what this one decorates.
 */
export const machinesPlugin = fp(
  async (app) => {
    const { deps } = app;
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

    if (deps.config.role === 'worker') return;
    const activity = createMachineActivity(deps);
    app.decorate('machineActivity', activity);
    app.addHook('onClose', () => activity.flush());
    // Before the routes, here and in the rooms registered after this one: the hook applies to the routes registered after it.
    recordRequestActivity(app, activity);
    await app.register(machinesRoutes);
    await app.register(poolsRoutes);
    await app.register(templatesRoutes);
  },
  { name: 'machines', dependencies: ['core', 'auth', 'jobs', 'maintenance'] },
);
