import { inTransaction, type Tx } from '../db/transaction.ts';
import { changedMeanwhile, wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById, toProviderMachine, type MachineRow } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { markStarting, markStopped, type StopReason } from '../machines/machine-transitions.ts';
import type { MachineProvider } from '../machines/provider.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import { completeRun, type RunOutcome } from './run-events.ts';
import { runNotFound } from './runs.errors.ts';
import { findRun, findRunById, insertRun, interruptedRunIds, listRunRows, toRunView, updateRunIf, type RunRow, type RunView } from './runs.repository.ts';
import type { RunSource } from './runs.tables.ts';

export interface RunRequest {
  source: RunSource;
  sourceId: string | null;
  sourceName: string | null;
  command: string;
  stopAfter: boolean;
}

export interface QueuedRun {
  run: RunRow;
  /** The machine is running: execute now rather than wait for the worker. */
  executeNow: boolean;
}

/**
 * Records a run inside the caller's transaction. A schedule or webhook that
 * finds its machine stopped (or failed) boots it and the run waits for the
 * boot; a machine that cannot run anything fails the run at once (`run.failed`).
 */
export async function queueRun(deps: Deps, provider: MachineProvider, tx: Tx, machine: MachineRow, request: RunRequest): Promise<QueuedRun> {
  const now = deps.clock.now();
  const run: RunRow = {
    id: newId('run', now),
    account_id: machine.account_id,
    machine_id: machine.id,
    source: request.source,
    source_id: request.sourceId,
    source_name: request.sourceName,
    command: request.command,
    stop_after: request.stopAfter ? 1 : 0,
    status: 'pending',
    exit_code: null,
    output: null,
    created_at: now,
    started_at: null,
    finished_at: null,
  };
  await insertRun(tx.db, run);
  if (machine.status === 'running') return { run, executeNow: true };
  if (machine.status === 'starting') return { run, executeNow: false };
  const bootable = (machine.status === 'stopped' || machine.status === 'error') && machine.expired_at === null;
  if (bootable && request.source !== 'manual') {
    const { checkAt } = await provider.boot(toProviderMachine(machine), now);
    if ((await markStarting(deps, tx, machine, checkAt)) !== null) return { run, executeNow: false };
  }
  const why = machine.expired_at !== null ? 'has expired' : `is ${machine.status}`;
  await completeRun(deps, tx, run, 'pending', machine, { exitCode: null, output: `The machine ${why}; the run could not start.` });
  return { run, executeNow: false };
}

function stopReasonOf(run: RunRow): StopReason {
  if (run.source === 'schedule') return `after schedule ${run.source_name}`;
  if (run.source === 'webhook') return `after webhook ${run.source_name}`;
  return 'requested';
}

/**
 * Executes a pending run on its machine, once: whoever moves it from pending
 * to running owns it. Then records the outcome with its event and, with
 * stopAfter, stops the machine (`machine.stopped`, reason `after schedule <name>`…).
 */
export async function executeRun(deps: Deps, provider: MachineProvider, runId: string): Promise<void> {
  if (!(await updateRunIf(deps.db, runId, 'pending', { status: 'running', started_at: deps.clock.now() }))) return;
  const run = (await findRunById(deps.db, runId))!;
  let machine = (await findMachineById(deps.db, run.machine_id))!;
  let outcome: RunOutcome;
  if (machine.status !== 'running') {
    outcome = { exitCode: null, output: `The machine is ${machine.status}; the run could not start.` };
  } else {
    try {
      outcome = await provider.runCommand(toProviderMachine(machine), run.command);
    } catch (err) {
      deps.logger.error({ err, runId }, 'the provider failed to run a command');
      outcome = { exitCode: null, output: 'The machine could not run the command.' };
    }
  }
  const stopAfter = run.stop_after === 1;
  if (stopAfter) {
    machine = (await findMachineById(deps.db, run.machine_id))!;
    if (machine.status === 'running') await provider.stop(toProviderMachine(machine));
  }
  await inTransaction(deps.db, async (tx) => {
    await completeRun(deps, tx, run, 'running', machine, outcome);
    if (stopAfter && machine.status === 'running') await markStopped(deps, tx, machine, stopReasonOf(run));
  });
}

/**
 * Fails runs whose process died while they ran, with `run.failed`, so no run
 * is left `running` and no run event is lost. Compare-and-set: once, whichever process sees it.
 */
export async function failInterruptedRuns(deps: Deps, provider: MachineProvider, limit: number): Promise<void> {
  for (const runId of await interruptedRunIds(deps.db, deps.clock.now() - provider.maxRunMs, limit)) {
    const run = (await findRunById(deps.db, runId))!;
    const machine = (await findMachineById(deps.db, run.machine_id))!;
    await inTransaction(deps.db, (tx) =>
      completeRun(deps, tx, run, 'running', machine, { exitCode: null, output: 'The run was interrupted: the service stopped while it ran.' }),
    );
  }
}

/**
 * A manual run: the machine must be running; the answer is the finished run.
 * @throws AppError 404 unknown machine, 409 invalid_state when it is not running.
 */
export async function runCommand(
  deps: Deps,
  provider: MachineProvider,
  accountId: string,
  machineId: string,
  input: { command: string; stopAfter: boolean },
): Promise<RunView> {
  const machine = await getMachineRow(deps, accountId, machineId);
  if (machine.status !== 'running') throw wrongStatus('run commands', machine.status);
  const { run } = await inTransaction(deps.db, (tx) =>
    queueRun(deps, provider, tx, machine, { source: 'manual', sourceId: null, sourceName: null, command: input.command, stopAfter: input.stopAfter }),
  );
  await executeRun(deps, provider, run.id);
  const finished = await findRunById(deps.db, run.id);
  if (finished === undefined) throw changedMeanwhile();
  return toRunView(finished);
}

/** @throws AppError 404 for an unknown run or another account's. */
export async function getRun(deps: Deps, accountId: string, id: string): Promise<RunView> {
  const row = await findRun(deps.db, accountId, id);
  if (row === undefined) throw runNotFound();
  return toRunView(row);
}

/** @throws AppError 404 for an unknown machine. */
export async function listRuns(deps: Deps, accountId: string, machineId: string, limit: number, cursor: string | undefined): Promise<RunView[]> {
  await getMachineRow(deps, accountId, machineId);
  return (await listRunRows(deps.db, machineId, limit, cursor)).map(toRunView);
}
