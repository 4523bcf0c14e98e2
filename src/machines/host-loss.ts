import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { PLACED_STATUSES, setHostState } from '../hosts/hosts.repository.ts';
import { markError } from './machine-transitions.ts';

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
