import type { Tx } from '../db/transaction.ts';
import type { MachineRow } from './machines.repository.ts';

/**
 * What a room built on machines keeps about one and changes in the same
 * transaction as the machine's state: runs/ starts the runs waiting for a
 * machine that came up, fails them when it went down first and drops its
 * triggers when it is destroyed; machine-access/ drops its live views. The
 * composition root lists them in Deps.machineFollowers, so machines/ never
 * imports the rooms built on it (and D is Deps, which imports this file).
 */
export interface MachineFollower<D> {
  /** It finished a boot (not a resume: nothing waited for a paused machine). */
  running?(deps: D, tx: Tx, machine: MachineRow): Promise<void>;
  /** It stopped, failed or was destroyed; `cause` is a sentence's subject: "The machine stopped (idle)". */
  down?(deps: D, tx: Tx, machine: MachineRow, cause: string): Promise<void>;
  destroyed?(deps: D, tx: Tx, machine: MachineRow): Promise<void>;
}
