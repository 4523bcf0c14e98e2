import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { PLACED_STATUSES, setHostState } from '../hosts/hosts.repository.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { markError, markPaused, markRunning, markStopped } from './machine-transitions.ts';
import { findMachineById, toProviderMachine } from './machines.repository.ts';

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
 * A lost host that answers again: each of its machines in `error` is looked
 * at and set to what it really is, with the matching event: running
 * (`machine.started`, reason `host-back`), paused, or stopped (its engine
 * stopped it when it restarted: `machine.stopped`, reason `platform`). One
 * whose container is gone stays in error. Safe in every process at once: each
 * change is a compare-and-set on the machine's version.
 */
export async function recoverHost(deps: Deps, provider: MachineProvider, host: string): Promise<void> {
  const machines = await deps.db.selectFrom('machines').select('id').where('host', '=', host).where('status', '=', 'error').execute();
  for (const { id } of machines) {
    const row = await findMachineById(deps.db, id);
    if (row === undefined || row.status !== 'error') continue;
    const now = deps.clock.now();
    // Asked as if running: the engine then says whether it runs, is frozen, ended or is gone.
    const { observation } = await provider.observe({ ...toProviderMachine(row), status: 'running' }, now).catch((err: unknown) => {
      deps.logger.warn({ err, machineId: id, host }, 'a machine of a host back could not be looked at');
      return { observation: { status: 'error' as const } };
    });
    const seen = observation?.status ?? 'running';
    await inTransaction(deps.database, async (tx) => {
      if (seen === 'running') return markRunning(deps, tx, row, now + RECOVERED_CHECK_MS, { reason: 'host-back' });
      if (seen === 'paused') return markPaused(deps, tx, row, now + RECOVERED_CHECK_MS);
      if (seen === 'stopped') return markStopped(deps, tx, row, 'platform');
      return null;
    });
  }
}
