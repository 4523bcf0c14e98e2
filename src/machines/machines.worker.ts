import { inTransaction } from '../db/transaction.ts';
import { deleteExpiredReceipts } from '../runs/inbound-webhooks.repository.ts';
import type { RunExecutor } from '../runs/run-executor.ts';
import { executableRunIds } from '../runs/runs.repository.ts';
import { failOrphanedRuns } from '../runs/runs.service.ts';
import { fireDueSchedules } from '../runs/schedules.service.ts';
import type { Deps } from '../shared/deps.ts';
import { deleteExpiredLiveViews } from './live-views.repository.ts';
import { finishPending } from './machine-actions.ts';
import { markError, markExpired, markRunning, markStopped, markStopping } from './machine-transitions.ts';
import { machinesDueForCheck, machinesDueToExpire, toProviderMachine, updateMachineIf, type MachineRow } from './machines.repository.ts';
import { poolsOffCount, postponePool } from './pools.repository.ts';
import { destroyMarked, refillPool } from './pools.service.ts';
import type { MachineProvider } from './provider.ts';
import { retryDelayMs } from './retry.ts';

const BATCH = 100;

/**
 * One machine, schedule or pool failing (its host unreachable, say) must not
 * stop the pass for everyone else, nor come first again at the next one: the
 * failure is logged with what it concerned and the item is put off by a
 * growing delay (retryDelayMs), the others carry on.
 */
async function postponeMachine(deps: Deps, machine: MachineRow, step: 'observe' | 'expire', err: unknown): Promise<void> {
  const failures = machine.failures + 1;
  const retryAt = deps.clock.now() + retryDelayMs(failures);
  deps.logger.error({ err, machineId: machine.id, status: machine.status, step, failures, retryAt }, 'the machine worker failed on a machine; retrying later');
  const changes = step === 'observe' ? { check_at: retryAt, failures } : { retry_at: retryAt, failures };
  await updateMachineIf(deps.db, machine, changes, deps.clock.now()).catch((error: unknown) =>
    deps.logger.error({ err: error, machineId: machine.id }, 'could not postpone a failing machine'),
  );
}

/**
 * Asks the provider about machines whose check is due (boots finishing, hosts
 * stopping them) and applies what it says; finishes stops and destroys whose
 * process died before recording the host's answer.
 */
export async function observeDueMachines(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const machine of await machinesDueForCheck(deps.db, deps.clock.now(), BATCH)) {
    try {
      await observeMachine(deps, provider, machine);
    } catch (err) {
      await postponeMachine(deps, machine, 'observe', err);
    }
  }
}

async function observeMachine(deps: Deps, provider: MachineProvider, machine: MachineRow): Promise<void> {
  if (machine.status === 'stopping') {
    await finishPending(deps, provider, machine);
    return;
  }
  if (machine.status !== 'starting' && machine.status !== 'running') {
    await updateMachineIf(deps.db, machine, { check_at: null }, deps.clock.now());
    return;
  }
  const { observation, checkAt } = await provider.observe(toProviderMachine(machine), deps.clock.now());
  await inTransaction(deps.db, async (tx) => {
    if (observation === null || observation.status === machine.status) {
      await updateMachineIf(tx.db, machine, { check_at: checkAt, failures: 0 }, deps.clock.now());
    } else if (observation.status === 'running') {
      await markRunning(deps, tx, machine, checkAt);
    } else if (observation.status === 'error') {
      await markError(deps, tx, machine, observation.reason, observation.message);
    } else {
      await markStopped(deps, tx, machine, observation.reason);
    }
  });
}

/**
 * `machine.expired`, then the stop (reason `expired`) or the destroy that
 * `onExpire` asks for: recorded (`stopping`) in the same transaction as the
 * expiry, asked of the host after, then `machine.stopped` or `machine.destroyed`.
 */
export async function expireDueMachines(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const machine of await machinesDueToExpire(deps.db, deps.clock.now(), BATCH)) {
    try {
      const stopping = await inTransaction(deps.db, async (tx) => {
        const expired = await markExpired(deps, tx, machine);
        if (expired === null) return null;
        if (machine.on_expire === 'destroy') return markStopping(deps, tx, expired, { action: 'destroy', reason: 'expired' });
        if (machine.status === 'running' || machine.status === 'starting') return markStopping(deps, tx, expired, { action: 'stop', reason: 'expired' });
        return null;
      });
      if (stopping !== null) await finishPending(deps, provider, stopping);
    } catch (err) {
      await postponeMachine(deps, machine, 'expire', err);
    }
  }
}

/** Runs waiting for their machine's boot, now that it is up: handed to the executor, never executed in the pass. */
export async function submitReadyRuns(deps: Deps, executor: RunExecutor): Promise<void> {
  for (const runId of await executableRunIds(deps.db, BATCH)) executor.submit(runId);
}

/** Pools short of (or over) their count: after a claim elsewhere failed to refill, or a pooled machine failed or stopped. */
export async function refillPools(deps: Deps, provider: MachineProvider): Promise<void> {
  for (const pool of await poolsOffCount(deps.db, deps.clock.now(), BATCH)) {
    try {
      const refill = await inTransaction(deps.db, (tx) => refillPool(deps, provider, tx, pool.id));
      await destroyMarked(deps, provider, refill.surplus);
      if (refill.bootFailures > 0) throw new Error(`the host refused ${refill.bootFailures} boot(s)`);
      if (pool.failures > 0) await postponePool(deps.db, pool.id, 0, null);
    } catch (err) {
      const failures = pool.failures + 1;
      const retryAt = deps.clock.now() + retryDelayMs(failures);
      deps.logger.error({ err, poolId: pool.id, failures, retryAt }, 'a pool could not be refilled; retrying later');
      await postponePool(deps.db, pool.id, failures, retryAt).catch((error: unknown) =>
        deps.logger.error({ err: error, poolId: pool.id }, 'could not postpone a failing pool'),
      );
    }
  }
}

/**
 * One pass over everything time-driven. Every step is safe to run in several
 * processes at once, and each runs even if an earlier one failed.
 */
export async function runMachineWork(deps: Deps, provider: MachineProvider, executor: RunExecutor): Promise<void> {
  const steps: Array<[string, () => Promise<void>]> = [
    ['observe machines', () => observeDueMachines(deps, provider)],
    ['expire machines', () => expireDueMachines(deps, provider)],
    ['fire schedules', () => fireDueSchedules(deps, provider, executor)],
    ['submit ready runs', () => submitReadyRuns(deps, executor)],
    // This process is alive: its own runs' leases first, so that only the runs of dead processes are failed next.
    ['renew run leases', () => executor.renewLeases()],
    ['fail orphaned runs', () => failOrphanedRuns(deps, BATCH)],
    ['refill pools', () => refillPools(deps, provider)],
    ['delete expired live views', () => deleteExpiredLiveViews(deps.db, deps.clock.now())],
    ['delete expired webhook receipts', () => deleteExpiredReceipts(deps.db, deps.clock.now())],
  ];
  for (const [step, work] of steps) {
    try {
      await work();
    } catch (err) {
      deps.logger.error({ err, step }, 'a machine worker step failed');
    }
  }
}

export interface MachineWorker {
  /** One pass now (tests call it instead of waiting for the interval). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/** Runs a pass every `workerIntervalMs` when `loop` is on; passes never overlap, and a failing pass is logged and retried next time. */
export function startMachineWorker(deps: Deps, provider: MachineProvider, executor: RunExecutor, options: { loop: boolean }): MachineWorker {
  let current: Promise<void> | null = null;
  const pass = (): Promise<void> => {
    const running: Promise<void> = runMachineWork(deps, provider, executor).finally(() => {
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
