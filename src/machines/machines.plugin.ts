import fp from 'fastify-plugin';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import type { Timer } from '../shared/clock.ts';
import { readyHosts, watchHostsOnce } from '../hosts/hosts.service.ts';
import { registerHostMetrics } from '../hosts/hosts.metrics.ts';
import { loseHost, recoverHost } from './host-loss.ts';
import type { MachineProvider } from '../providers/provider.ts';
import type { ImageBuild } from '../providers/docker/image-build.ts';
import { machineCheckJob } from './job-types.ts';
import { createMachineActivity, recordRequestActivity, type MachineActivity } from './activity.ts';
import { findMachineById } from './machines.repository.ts';
import { authenticateMachineToken } from './machine-tokens.ts';
import { machineJobKinds } from './machines.jobs.ts';
import { machinesRoutes } from './machines.routes.ts';
import { chooseProvider, type MachineHost } from './provider-choice.ts';
import { poolsRoutes } from './pools.routes.ts';
import { templatesRoutes } from './templates.routes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    machineProvider: MachineProvider;
    /** What machines run on here (MACHINE_PROVIDER=auto chooses at start-up): the start-up line and the dashboard say it. */
    machineHost: MachineHost;
    /** Records what keeps machines awake (activity.ts); absent where the role serves no API. */
    machineActivity: MachineActivity;
  }
}

/** A machine the host says changed on its own is checked now, if it is one the service believes up. */
async function checkNow(deps: Deps, machineId: string): Promise<void> {
  const machine = await findMachineById(deps.db, machineId);
  if (machine?.status !== 'running' && machine?.status !== 'starting' && machine?.status !== 'paused') return;
  await inTransaction(deps.database, (tx) => deps.jobs.schedule(tx, machineCheckJob, machineId, { machineId }, deps.clock.now()));
}

/** How often a process pings its hosts and readies those added since; a third of the grace, at most 5 s. */
const hostWatchMs = (lostAfterMs: number) => Math.min(5000, Math.max(250, Math.floor(lostAfterMs / 3)));

/** Watches the hosts until stopped: readies new ones, records who answers, and declares lost those silent past their grace. */
function watchHosts(deps: Deps, provider: MachineProvider, onStop: (stop: () => void) => void): void {
  let timer: Timer | null = null;
  let stopped = false;
  const pass = async () => {
    try {
      const { silent, answering } = await watchHostsOnce(deps, provider);
      for (const host of silent) {
        const down = await loseHost(deps, host.name);
        if (down !== null) deps.logger.error({ host: host.name, machines: down }, 'a host stopped answering: it is lost, and its machines are in error');
      }
      // Every pass, not only the one that brings a host back: a recovery cut short (a crash, a machine not answering yet) goes on.
      for (const host of answering) await recoverHost(deps, provider, host);
    } catch (err) {
      deps.logger.warn({ err }, 'a pass over the hosts failed; the next one tries again');
    }
    if (!stopped) timer = deps.clock.setTimeout(() => void pass(), hostWatchMs(deps.config.machines.hostLostAfterMs));
  };
  timer = deps.clock.setTimeout(() => void pass(), hostWatchMs(deps.config.machines.hostLostAfterMs));
  onStop(() => {
    stopped = true;
    timer?.clear();
  });
}

/**
 * Machines' lifecycle: the provider (the host), machines, pools, templates
 * and machine tokens. Routes where the role serves the API; background work
 * (checks, expiry, idle stops, refills) is jobs, run by whichever process
 * takes them. All state is in the database, so any number of processes can
 * share it and a restart loses nothing. runs.plugin.ts and
 * machine-access.plugin.ts build on what this one decorates.
 */
export type { MachineHost } from './provider-choice.ts';

export const machinesPlugin = fp<{ imageBuild?: ImageBuild }>(
  async (app, options) => {
    const { deps } = app;
    // Where jobs run, the image is built; an API process (ROLE=api) waits for it.
    const choice = await chooseProvider(deps.config.machines, deps, { build: options.imageBuild, buildsImage: deps.config.role !== 'api' });
    const { provider } = choice;
    await provider.start?.();
    await readyHosts(deps, provider);
    if (provider.hosts) registerHostMetrics(app.metrics.registry, deps.db, deps.config.machines);
    app.decorate('machineProvider', provider);
    app.decorate('machineHost', choice.host);
    app.addHook('onClose', async () => choice.close());
    if (deps.config.role !== 'api' && provider.watch) {
      const unwatch = provider.watch((machineId) => {
        checkNow(deps, machineId).catch((err: unknown) => deps.logger.error({ err, machineId }, 'could not schedule the check of a machine the host reported'));
      });
      app.addHook('preClose', async () => unwatch());
    }
    if (deps.config.role !== 'api' && provider.hosts) watchHosts(app.deps, provider, (stop) => app.addHook('preClose', async () => stop()));
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
