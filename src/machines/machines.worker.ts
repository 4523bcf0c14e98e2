import { inTransaction } from '../db/transaction.ts';
import { executableRunIds } from '../runs/runs.repository.ts';
import { executeRun, failInterruptedRuns } from '../runs/runs.service.ts';
import { fireDueSchedules } from '../runs/schedules.service.ts';
import type { Deps } from '../shared/deps.ts';
import { deleteExpiredLiveViews } from './live-views.repository.ts';
import { markError, markExpired, markDestroyed, markRunning, markStopped } from './machine-transitions.ts';
import { machinesDueForCheck, machinesDueToExpire, toProviderMachine, updateMachineIf } from './machines.repository.ts';
import { poolsOffCount } from './pools.repository.ts';
import { refillPool } from './pools.service.ts';
import type { MachineProvider } from './provider.ts';

const BATCH = 100;

/** Asks the provider about machines whose check is due (boots finishing, hosts stopping them) and applies what it says. */
export async function observeDueMachines(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const machine of await machinesDueForCheck(deps.db, deps.clock.now(), BATCH)) {
    if (machine.status !== 'starting' && machine.status !== 'running') {
      await updateMachineIf(deps.db, machine, { check_at: null }, deps.clock.now());
      continue;
    }
    const { observation, checkAt } = await provider.observe(toProviderMachine(machine), deps.clock.now());
    await inTransaction(deps.db, async (tx) => {
      if (observation === null || observation.status === machine.status) {
        await updateMachineIf(tx.db, machine, { check_at: checkAt }, deps.clock.now());
      } else if (observation.status === 'running') {
        await markRunning(deps, tx, machine, checkAt);
      } else if (observation.status === 'error') {
        await markError(deps, tx, machine, observation.reason, observation.message);
      } else {
        await markStopped(deps, tx, machine, observation.reason);
      }
    });
  }
}

/** `machine.expired`, then the stop (reason `expired`) or the destroy that `onExpire` asks for. */
export async function expireDueMachines(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const machine of await machinesDueToExpire(deps.db, deps.clock.now(), BATCH)) {
    const stop = machine.on_expire === 'stop' && (machine.status === 'running' || machine.status === 'starting');
    if (machine.on_expire === 'destroy') await provider.destroy(toProviderMachine(machine));
    else if (stop) await provider.stop(toProviderMachine(machine));
    await inTransaction(deps.db, async (tx) => {
      const expired = await markExpired(deps, tx, machine);
      if (expired === null) return;
      if (machine.on_expire === 'destroy') await markDestroyed(deps, tx, expired, 'expired');
      else if (stop) await markStopped(deps, tx, expired, 'expired');
    });
  }
}

/** Runs waiting for their machine's boot, now that it is up. */
export async function executeReadyRuns(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const runId of await executableRunIds(deps.db, BATCH)) await executeRun(deps, provider, runId);
}

/** Pools short of (or over) their count: after a claim elsewhere failed to refill, or a pooled machine failed or stopped. */
export async function refillPools(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const poolId of await poolsOffCount(deps.db, BATCH)) {
    await inTransaction(deps.db, (tx) => refillPool(deps, provider, tx, poolId));
  }
}

/** One pass over everything time-driven. Every step is safe to run in several processes at once. */
export async function runMachineWork(deps: Deps, provider: MachineProvider): Promise<void> {
  await observeDueMachines(deps, provider);
  await expireDueMachines(deps, provider);
  await fireDueSchedules(deps, provider);
  await executeReadyRuns(deps, provider);
  await failInterruptedRuns(deps, provider, BATCH);
  await refillPools(deps, provider);
  await deleteExpiredLiveViews(deps.db, deps.clock.now());
}

export interface MachineWorker {
  /** One pass now (tests call it instead of waiting for the interval). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/** Runs a pass every `workerIntervalMs` when `loop` is on; passes never overlap, and a failing pass is logged and retried next time. */
export function startMachineWorker(deps: Deps, provider: MachineProvider, options: { loop: boolean }): MachineWorker {
  let current: Promise<void> | null = null;
  const pass = (): Promise<void> => {
    const running: Promise<void> = runMachineWork(deps, provider).finally(() => {
      if (current === running) current = null;
    });
    current = running;
    return running;
  };
  const timer = options.loop
    ? setInterval(() => {
        if (current === null) pass().catch((err: unknown) => deps.logger.error({ err }, 'machine worker pass failed'));
      }, deps.config.machines.workerIntervalMs)
    : null;
  timer?.unref();
  const settle = async () => {
    while (current !== null) await current.catch(() => {});
  };
  return {
    async tick() {
      // A pass under way may have read the clock before the caller moved it: let it finish, then run a fresh one.
      await settle();
      await pass();
    },
    async stop() {
      if (timer !== null) clearInterval(timer);
      await settle();
    },
  };
}
