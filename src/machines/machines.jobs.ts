import { balanceEmptyStopJob, balanceIsEmpty } from '../billing/enforcement.ts';
import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import type { JobKind, Outcome } from '../jobs/job-kind.ts';
import { MINUTE, SECOND } from '../shared/clock.ts';
import { idleDeadline } from './activity.ts';
import { hostRetryDelay, machineCheckJob, machineExpireJob, machineIdleJob, machineMoveJob, poolRefillJob, templateMoveJob } from './job-types.ts';
import { moveMachine, moveTemplate } from './moves.service.ts';
import { finishPending, stopOrDestroy } from './machine-actions.ts';
import { markError, markExpired, markPaused, markResumed, markRunning, markStopped, markStopping } from './machine-transitions.ts';
import { activeMachinesOf, findMachineById, hasUnfinishedRun, toProviderMachine, type MachineRow } from './machines.repository.ts';
import { destroyMarked, refillPool } from './pools.service.ts';
import type { MachineProvider } from '../providers/provider.ts';

/** Host calls for machines and pools at once in one process. */
const HOST_CONCURRENCY = 16;
/** Moves at once in one process: each copies a whole disk between engines. */
const MOVE_CONCURRENCY = 2;
/** How long an expiry waits for a stop or destroy under way to finish first. */
const EXPIRY_WAIT_MS = 5 * SECOND;

const DONE: Outcome = { status: 'done' };
/** When a balance-empty stop lost a race with another change of a machine, how soon it looks again. */
const BALANCE_STOP_RECHECK_MS = SECOND;

/** How many times a job whose compare-and-set lost reads the machine again and acts on what it finds, before trying again a little later. */
const LOST_RACE_ATTEMPTS = 5;
/** When a job lost every attempt to other changes of the machine, how soon it looks again. */
const LOST_RACE_RECHECK_MS = SECOND;

/**
 * Asks the provider about a machine (boot finished? still up?) and applies
 * what it says, or finishes a stop or destroy whose process died before
 * recording the host's answer. The next check is whenever the provider asks.
 */
export async function checkMachine(deps: Deps, provider: MachineProvider, machineId: string): Promise<Outcome> {
  let machine = await findMachineById(deps.db, machineId);
  if (machine === undefined) return DONE;
  if (machine.status === 'stopping') {
    // Held by its move (moves.service.ts), which ends it itself.
    if (machine.pending_action === 'move') return DONE;
    await finishPending(deps, provider, machine);
    return DONE;
  }
  if (machine.status !== 'starting' && machine.status !== 'running' && machine.status !== 'paused') return DONE;
  const { observation, checkAt } = await provider.observe(toProviderMachine(machine), deps.clock.now());
  if (observation === null || observation.status === machine.status) return checkAt === null ? DONE : { status: 'later', at: checkAt };
  for (let attempt = 0; attempt < LOST_RACE_ATTEMPTS; attempt++) {
    const row: MachineRow = machine;
    // Each of these schedules (or cancels) the machine's next check itself, in its own transaction.
    const applied = await inTransaction(deps.database, async (tx) => {
      // Paused or unpaused on the host (by an operator, or by a pause whose recording lost a race): recorded as such.
      if (observation.status === 'paused') return markPaused(deps, tx, row, checkAt);
      if (observation.status === 'running') return row.status === 'paused' ? markResumed(deps, tx, row, checkAt) : markRunning(deps, tx, row, checkAt);
      if (observation.status === 'error') return markError(deps, tx, row, observation.reason, observation.message);
      return markStopped(deps, tx, row, observation.reason);
    });
    if (applied !== null) return DONE;
    // Lost: a claim or a new token changes the version but not the state, and the host's word still holds for the
    // machine as it is now; a change of state (a stop, an expiry) scheduled the machine's next check itself.
    const fresh = await findMachineById(deps.db, machineId);
    if (fresh === undefined || fresh.status !== row.status || fresh.status_changed_at !== row.status_changed_at) return DONE;
    machine = fresh;
  }
  return { status: 'later', at: deps.clock.now() + LOST_RACE_RECHECK_MS };
}

/**
 * `machine.expired`, then the stop (reason `expired`) or the destroy that
 * `onExpire` asks for: recorded (`stopping`) in the same transaction as the
 * expiry, asked of the host after, then `machine.stopped` or `machine.destroyed`.
 */
async function expireMachine(deps: Deps, provider: MachineProvider, machineId: string): Promise<Outcome> {
  // A lost compare-and-set is no reason to stop: the boot's check that fell due in the same pass (say) recorded
  // `running` first, and that running machine must expire all the same. So read again and act on what is there.
  for (let attempt = 0; attempt < LOST_RACE_ATTEMPTS; attempt++) {
    const machine = await findMachineById(deps.db, machineId);
    if (machine === undefined || machine.expired_at !== null || machine.status === 'destroyed') return DONE;
    if (machine.status === 'stopping') return { status: 'later', at: deps.clock.now() + EXPIRY_WAIT_MS };
    const outcome = await inTransaction(deps.database, async (tx) => {
      const expired = await markExpired(deps, tx, machine);
      if (expired === null) return 'lost' as const;
      if (machine.on_expire === 'destroy') return markStopping(deps, tx, expired, { action: 'destroy', reason: 'expired' });
      if (machine.status === 'running' || machine.status === 'starting' || machine.status === 'paused') return markStopping(deps, tx, expired, { action: 'stop', reason: 'expired' });
      return null;
    });
    if (outcome === 'lost') continue;
    if (outcome !== null) await finishPending(deps, provider, outcome);
    return DONE;
  }
  return { status: 'later', at: deps.clock.now() + LOST_RACE_RECHECK_MS };
}

/**
 * Billing found the account's balance empty: every starting or running
 * machine stops through the usual stop path (`machine.stopped`, reason
 * `balance-empty`). Nothing when the balance was topped up meanwhile.
 */
async function stopForEmptyBalance(deps: Deps, provider: MachineProvider, accountId: string): Promise<Outcome> {
  if (!(await balanceIsEmpty(deps, accountId))) return DONE;
  let failures = 0;
  let changed = 0;
  for (const machine of await activeMachinesOf(deps.db, accountId)) {
    const outcome = await stopOrDestroy(deps, provider, machine, { action: 'stop', reason: 'balance-empty' });
    if (outcome === null) changed++;
    else if (!outcome.ok) failures++;
  }
  if (failures > 0) return { status: 'failed', error: `the host failed to stop ${failures} machine(s)` };
  // A machine that changed meanwhile (its boot finished, say) is looked at again shortly.
  return changed > 0 ? { status: 'later', at: deps.clock.now() + BALANCE_STOP_RECHECK_MS } : DONE;
}

/** A busy machine (a run unfinished) is looked at again this often, or sooner when its autoStopMinutes are fewer. */
const BUSY_RECHECK_MS = 5 * MINUTE;

/**
 * Idle stop: a running machine with no activity (activity.ts)
 * for its `autoStopMinutes` is stopped through the usual stop path
 * (`machine.stopped`, reason `idle`). Due at the deadline its row said when it
 * was scheduled; activity since moves the deadline, and the job follows it
 * (one write per idle period, not one per activity). The stop is a
 * compare-and-set on the version and on the idleness itself, so activity or a
 * run that comes in between wins, whichever process runs the check. A paused
 * machine is left alone: it already costs the paused price, and its frozen
 * processes are what its owner asked to keep; its resume schedules the check
 * again.
 */
async function stopIfIdle(deps: Deps, provider: MachineProvider, machineId: string): Promise<Outcome> {
  for (let attempt = 0; attempt < LOST_RACE_ATTEMPTS; attempt++) {
    const machine = await findMachineById(deps.db, machineId);
    if (machine === undefined || machine.status !== 'running') return DONE;
    const deadline = idleDeadline(machine);
    if (deadline === null) return DONE;
    const now = deps.clock.now();
    if (deadline > now) return { status: 'later', at: deadline };
    if (await hasUnfinishedRun(deps.db, machine.id)) return { status: 'later', at: now + Math.min(BUSY_RECHECK_MS, machine.auto_stop_minutes * MINUTE) };
    const guard = { idleSince: now - machine.auto_stop_minutes * MINUTE };
    const stopping = await inTransaction(deps.database, (tx) => markStopping(deps, tx, machine, { action: 'stop', reason: 'idle' }, guard));
    if (stopping !== null) {
      await finishPending(deps, provider, stopping);
      return DONE;
    }
    // Lost: activity, a run or another change came first; read again and act on what is there.
  }
  return { status: 'later', at: deps.clock.now() + LOST_RACE_RECHECK_MS };
}

/** Brings a pool to its count; boots the host refuses fail the attempt, to be retried. */
async function refillPoolJob(deps: Deps, provider: MachineProvider, poolId: string): Promise<Outcome> {
  const refill = await inTransaction(deps.database, (tx) => refillPool(deps, provider, tx, poolId));
  await destroyMarked(deps, provider, refill.surplus);
  if (refill.bootFailures > 0) return { status: 'failed', error: `the host refused ${refill.bootFailures} boot(s)` };
  return DONE;
}

export function hostKind<Payload>(type: JobKind<Payload>['type'], perform: (payload: Payload) => Promise<Outcome>): JobKind<Payload> {
  return { type, concurrency: HOST_CONCURRENCY, retryDelay: hostRetryDelay, perform: (job) => perform(job.payload) };
}

/** The machines domain's background work. */
export function machineJobKinds(deps: Deps, provider: MachineProvider) {
  return [
    hostKind(machineCheckJob, ({ machineId }) => checkMachine(deps, provider, machineId)),
    hostKind(machineExpireJob, ({ machineId }) => expireMachine(deps, provider, machineId)),
    hostKind(machineIdleJob, ({ machineId }) => stopIfIdle(deps, provider, machineId)),
    hostKind(balanceEmptyStopJob, ({ accountId }) => stopForEmptyBalance(deps, provider, accountId)),
    hostKind(poolRefillJob, ({ poolId }) => refillPoolJob(deps, provider, poolId)),
    { ...hostKind(machineMoveJob, ({ machineId }) => moveMachine(deps, provider, machineId)), concurrency: MOVE_CONCURRENCY },
    { ...hostKind(templateMoveJob, ({ templateId, from }) => moveTemplate(deps, provider, templateId, from)), concurrency: MOVE_CONCURRENCY },
  ];
}
