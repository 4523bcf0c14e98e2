import { inTransaction, type Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import {
  markDestroyed,
  markError,
  markStopped,
  markStopping,
  scheduleCheck,
  type DestroyReason,
  type Pending,
  type StopReason,
} from './machine-transitions.ts';
import { findMachineById, toProviderMachine, updateMachineIf, type MachineRow } from './machines.repository.ts';
import { LOCAL_HOST, type MachineProvider } from '../providers/provider.ts';

/**
 * The machine changes that need the host, each in the same order: record the
 * change in the database first (a compare-and-set, so one caller wins), then
 * ask the host, then record its outcome with the event. The host is never
 * asked by a caller whose database write lost, and a host that fails leaves
 * the machine in `error` with `machine.error`: that is what the database
 * says and what the API shows, and from `error` a machine can be started or
 * destroyed again.
 */

/** How long after a boot call its check asks the provider itself, should the call's answer never be recorded. */
export const BOOT_CALL_GRACE_MS = 30_000;

export interface HostOutcome {
  /** The machine as it now is. */
  machine: MachineRow;
  /** False when the host failed and the machine was put in `error`. */
  ok: boolean;
}

async function current(deps: Deps, row: MachineRow, tx?: Tx): Promise<MachineRow> {
  return (await findMachineById(tx?.db ?? deps.db, row.id)) ?? row;
}

/**
 * Asks the host to boot a machine already recorded as `starting` (created, or
 * moved there by markStarting), then records when to ask about it. A host that
 * refuses leaves it in `error` (`machine.error`, reason `boot-failure`).
 * Within `tx` when given (a run booting its machine), else in transactions of its own.
 */
export async function bootStarting(deps: Deps, provider: MachineProvider, row: MachineRow, tx?: Tx): Promise<HostOutcome> {
  let checkAt: number;
  try {
    ({ checkAt } = await provider.boot(toProviderMachine(row), deps.clock.now()));
  } catch (err) {
    deps.logger.error({ err, machineId: row.id }, 'the host failed to boot a machine');
    const mark = (t: Tx) => markError(deps, t, row, 'boot-failure', 'The host could not boot the machine.');
    const failed = tx ? await mark(tx) : await inTransaction(deps.database, mark);
    return { machine: failed ?? (await current(deps, row, tx)), ok: false };
  }
  const now = deps.clock.now();
  // False: someone moved the machine on meanwhile (its check asked the provider, or a stop began); theirs is the newer word.
  const record = async (t: Tx) => {
    if (!(await updateMachineIf(t.db, row, {}, now))) return false;
    await scheduleCheck(deps, t, row.id, checkAt);
    return true;
  };
  if (await (tx ? record(tx) : inTransaction(deps.database, record))) return { machine: { ...row, version: row.version + 1, updated_at: now }, ok: true };
  return { machine: await current(deps, row, tx), ok: true };
}

/**
 * Stops or destroys a machine: `stopping` first, then the host, then
 * `stopped` or `destroyed` with its event. Null when the machine changed
 * before the compare-and-set, in which case nothing was asked of the host.
 */
export async function stopOrDestroy(deps: Deps, provider: MachineProvider, row: MachineRow, pending: Pending): Promise<HostOutcome | null> {
  const stopping = await inTransaction(deps.database, (tx) => markStopping(deps, tx, row, pending));
  if (stopping === null) return null;
  return finishPending(deps, provider, stopping);
}

function pendingOf(row: MachineRow): Pending {
  if (row.pending_action === 'destroy') return { action: 'destroy', reason: (row.pending_reason ?? 'requested') as DestroyReason };
  return { action: 'stop', reason: (row.pending_reason ?? 'requested') as StopReason };
}

/** Whether the machine's host does not answer now: lost, or silent before it is declared so. Never, for a provider without hosts. */
export async function hostIsSilent(provider: MachineProvider, machine: Pick<MachineRow, 'host'>): Promise<boolean> {
  if (provider.hosts === undefined) return false;
  return !(await provider.hosts.ping(machine.host ?? LOCAL_HOST));
}

/**
 * Asks the host for the stop or destroy that a `stopping` machine records,
 * then records the outcome with its event (`machine.stopped` or
 * `machine.destroyed`; `machine.error` with reason `stop-failure` or
 * `destroy-failure` when the host fails). Safe to repeat: providers' stop and
 * destroy are idempotent and the final write is a compare-and-set.
 */
export async function finishPending(deps: Deps, provider: MachineProvider, row: MachineRow): Promise<HostOutcome> {
  const pending = pendingOf(row);
  try {
    if (pending.action === 'destroy') await provider.destroy(toProviderMachine(row));
    else await provider.stop(toProviderMachine(row));
  } catch (err) {
    // A destroy is its owner's last word: a host that does not answer (lost) does not keep the machine, nor its bill.
    // Its container is removed once the host answers again (host-loss.ts).
    if (pending.action === 'destroy' && (await hostIsSilent(provider, row))) {
      deps.logger.warn({ err, machineId: row.id, host: row.host }, 'a machine was destroyed while its host does not answer; its container goes when the host answers again');
      const destroyed = await inTransaction(deps.database, (tx) => markDestroyed(deps, tx, row, pending.reason, true));
      return { machine: destroyed ?? (await current(deps, row)), ok: true };
    }
    deps.logger.error({ err, machineId: row.id, action: pending.action }, 'the host failed to stop or destroy a machine');
    const message = pending.action === 'destroy' ? 'The host could not destroy the machine.' : 'The host could not stop the machine.';
    const failed = await inTransaction(deps.database, (tx) => markError(deps, tx, row, `${pending.action}-failure`, message));
    return { machine: failed ?? (await current(deps, row)), ok: false };
  }
  const done = await inTransaction(deps.database, (tx) =>
    pending.action === 'destroy' ? markDestroyed(deps, tx, row, pending.reason) : markStopped(deps, tx, row, pending.reason),
  );
  return { machine: done ?? (await current(deps, row)), ok: true };
}
