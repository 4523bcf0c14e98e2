import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { PLACED_STATUSES, setHostState } from '../hosts/hosts.repository.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { markError, markPaused, markRunning, markStopped } from './machine-transitions.ts';
import { toProviderMachine, updateMachineIf, type MachineRow } from './machines.repository.ts';

/** After a host is back, how soon its running machines are looked at again (as after a boot). */
const RECOVERED_CHECK_MS = 60_000;

/**
 * A host no process has heard from past its grace is lost, once (a
 * compare-and-set on its state, so of all the processes that see it silent
 * one acts): each machine on it that runs or was to run is `error` with
 * reason `host-lost` (`machine.error`), keeping its record and its runs'
 * records, its metering stopped now. Answers how many machines it took down;
 * null when another process had declared it lost first.
 */
export async function loseHost(deps: Deps, host: string): Promise<number | null> {
  return inTransaction(deps.database, async (tx) => {
    if (!(await setHostState(tx.db, host, 'lost', deps.clock.now()))) return null;
    const machines = await tx.db.selectFrom('machines').selectAll().where('host', '=', host).where('status', 'in', [...PLACED_STATUSES]).execute();
    let down = 0;
    for (const machine of machines) {
      if ((await markError(deps, tx, machine, 'host-lost', `The machine's host (${host}) stopped answering.`)) !== null) down++;
    }
    return down;
  });
}

/**
 * A host that answers (each pass of the host watch, so a recovery cut short
 * by a crash is taken up again): each of its machines whose record waits for
 * it is set to what it really is. One in `error` since the host was lost is
 * looked at and gets the matching event: running (`machine.started`, reason
 * `host-back`), paused, or stopped (its engine stopped it when it restarted:
 * `machine.stopped`, reason `platform`); one whose container is gone stays in
 * error. One destroyed meanwhile has its container removed. Other errors are
 * left as they are. Safe in every process at once: each change is a
 * compare-and-set on the machine's version, and a destroy may be repeated.
 */
export async function recoverHost(deps: Deps, provider: MachineProvider, host: string): Promise<void> {
  // Whole rows at once: each change below is a compare-and-set on the version, so a row changed since loses it.
  const waiting = await deps.db.selectFrom('machines').selectAll().where('host', '=', host).where('lost_with_host', '=', 1).execute();
  for (const row of waiting) {
    const id = row.id;
    if (row.status === 'destroyed') {
      await removeLeftContainer(deps, provider, row);
      continue;
    }
    if (row.status !== 'error') continue;
    const now = deps.clock.now();
    // Asked as if running: the engine then says whether it runs, is frozen, ended or is gone.
    const { observation } = await provider.observe({ ...toProviderMachine(row), status: 'running' }, now).catch((err: unknown) => {
      deps.logger.warn({ err, machineId: id, host }, 'a machine of a host back could not be looked at; the next pass asks again');
      return { observation: { status: 'unknown' as const } };
    });
    const seen = observation?.status ?? 'running';
    await inTransaction(deps.database, async (tx) => {
      if (seen === 'running') return markRunning(deps, tx, row, now + RECOVERED_CHECK_MS, { reason: 'host-back' });
      if (seen === 'paused') return markPaused(deps, tx, row, now + RECOVERED_CHECK_MS);
      if (seen === 'stopped') return markStopped(deps, tx, row, 'platform');
      // Gone from its host: it stays in error, no longer waiting.
      if (seen === 'error') return updateMachineIf(tx.db, row, { lost_with_host: 0 }, now);
      return null;
    });
  }
}

/** The container of a machine destroyed while its host was silent. */
async function removeLeftContainer(deps: Deps, provider: MachineProvider, row: MachineRow): Promise<void> {
  try {
    await provider.destroy(toProviderMachine(row));
  } catch (err) {
    deps.logger.warn({ err, machineId: row.id, host: row.host }, 'the container of a machine destroyed while its host was lost could not be removed; the next pass tries again');
    return;
  }
  await updateMachineIf(deps.db, row, { lost_with_host: 0 }, deps.clock.now());
}
