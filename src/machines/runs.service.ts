import { inTransaction, type Tx } from '../db/transaction.ts';
import { balanceIsEmpty } from '../billing/enforcement.ts';
import { forbidden } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { runExecuteJob } from './job-types.ts';
import { BOOT_CALL_GRACE_MS, bootStarting, finishPending } from './machine-actions.ts';
import { markStarting, markStopping, type StopReason } from './machine-transitions.ts';
import { wrongStatus } from './machines.errors.ts';
import { findMachineById, toProviderMachine, type MachineRow } from './machines.repository.ts';
import { getMachineRow } from './machines.service.ts';
import type { MachineProvider } from './provider.ts';
import { completeRun, type RunOutcome } from './run-events.ts';
import { runNotFound } from './runs.errors.ts';
import { claimRun, findRun, findRunById, insertRun, listRunRows, toRunView, type RunRow, type RunView } from './runs.repository.ts';
import type { RunSource } from './runs.tables.ts';

export const ORPHANED_RUN_OUTPUT = 'The run was interrupted: the process executing it stopped before the run finished.';

export interface RunRequest {
  /** Chosen by the caller when it must refer to the run before it exists (an inbound webhook's receipt). */
  id?: string;
  source: RunSource;
  sourceId: string | null;
  sourceName: string | null;
  command: string;
  stopAfter: boolean;
}

/**
 * Records a run inside the caller's transaction and answers it as it now is.
 * On a running machine the run's job is queued with it; it never executes
 * here. A schedule or webhook that finds its machine stopped (or failed) boots
 * it and the run waits for the boot (which queues its job); a machine that
 * cannot run anything fails the run at once (`run.failed`).
 */
export async function queueRun(
  deps: Deps,
  provider: MachineProvider,
  tx: Tx,
  machine: MachineRow,
  request: RunRequest,
): Promise<RunRow> {
  const now = deps.clock.now();
  const run: RunRow = {
    id: request.id ?? newId('run', now),
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
  if (machine.status === 'running') {
    await deps.jobs.enqueue(tx, runExecuteJob, [{ payload: { runId: run.id } }]);
    return run;
  }
  if (machine.status === 'starting') return run;
  const bootable = (machine.status === 'stopped' || machine.status === 'error') && machine.expired_at === null;
  const unpaid = bootable && request.source !== 'manual' && (await balanceIsEmpty(deps, machine.account_id, tx.db));
  if (bootable && request.source !== 'manual' && !unpaid) {
    const starting = await markStarting(deps, tx, machine, now + BOOT_CALL_GRACE_MS);
    if (starting !== null) {
      // A refused boot puts the machine in error, which fails this run with it.
      await bootStarting(deps, provider, starting, tx);
      return (await findRunById(tx.db, run.id))!;
    }
  }
  const why = unpaid ? `is ${machine.status} and the balance is empty` : machine.expired_at !== null ? 'has expired' : `is ${machine.status}`;
  await completeRun(deps, tx, run, 'pending', machine, { exitCode: null, output: `The machine ${why}; the run could not start.` });
  return (await findRunById(tx.db, run.id))!;
}

function stopReasonOf(run: RunRow): StopReason {
  if (run.source === 'schedule') return `after schedule ${run.source_name}`;
  if (run.source === 'webhook') return `after webhook ${run.source_name}`;
  return 'requested';
}

/**
 * The run's job: executes a pending run, once (whoever moves it from pending
 * to running owns it), records the outcome with its event and, with
 * stopAfter, stops the machine (`machine.stopped`, reason `after schedule
 * <name>`…). A run found `running` was started by a process that died (its
 * job's lease ran out): it is failed, with `run.failed`, never run twice.
 */
export async function executeRun(deps: Deps, provider: MachineProvider, runId: string): Promise<void> {
  const found = await findRunById(deps.db, runId);
  if (found?.status === 'running') return failInterruptedRun(deps, found);
  if (found?.status !== 'pending' || !(await claimRun(deps.db, runId, deps.clock.now()))) return;
  const run = (await findRunById(deps.db, runId))!;
  const machine = (await findMachineById(deps.db, run.machine_id))!;
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
  const after = (await findMachineById(deps.db, run.machine_id)) ?? machine;
  const stopping = await inTransaction(deps.db, async (tx) => {
    // False: the run is no longer ours (it outlived its lease and was failed as orphaned), so neither its outcome nor its stopAfter applies.
    if (!(await completeRun(deps, tx, run, 'running', after, outcome))) return null;
    if (run.stop_after !== 1 || after.status !== 'running') return null;
    return markStopping(deps, tx, after, { action: 'stop', reason: stopReasonOf(run) });
  });
  if (stopping !== null) await finishPending(deps, provider, stopping);
}

/** So no run is left `running` and no run event is lost. Compare-and-set: once, whichever process gets there. */
async function failInterruptedRun(deps: Deps, run: RunRow): Promise<void> {
  const machine = (await findMachineById(deps.db, run.machine_id))!;
  await inTransaction(deps.db, (tx) => completeRun(deps, tx, run, 'running', machine, { exitCode: null, output: ORPHANED_RUN_OUTPUT }));
}

export interface ManualRun {
  command: string;
  stopAfter: boolean;
}

/**
 * A manual run: the machine must be running; the answer is the run as queued
 * (pending), its outcome follows as `run.succeeded` / `run.failed`.
 * @throws AppError 404 unknown machine, 409 invalid_state when it is not running.
 */
export async function startManualRun(
  deps: Deps,
  provider: MachineProvider,
  accountId: string,
  machineId: string,
  input: ManualRun,
): Promise<RunView> {
  const machine = await getMachineRow(deps, accountId, machineId);
  if (machine.status !== 'running') throw wrongStatus('run commands', machine.status);
  const run = await inTransaction(deps.db, (tx) =>
    queueRun(deps, provider, tx, machine, { source: 'manual', sourceId: null, sourceName: null, command: input.command, stopAfter: input.stopAfter }),
  );
  return toRunView(run);
}

/**
 * A manual run for a synchronous caller (an agent's MCP tool): queued like any
 * other, then waited for, at most the provider's longest run; the answer is
 * the finished run, or the run as it is then (still `running`).
 * @throws AppError 404 unknown machine, 409 invalid_state when it is not running.
 */
export async function runAndWait(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, input: ManualRun): Promise<RunView> {
  const queued = await startManualRun(deps, provider, accountId, machineId, input);
  const run = await waitForRun(deps, queued.id, provider.maxRunMs);
  return run === undefined ? queued : toRunView(run);
}

/** How often a waiter reads the run anyway, should the signal of its end be missed (a lost listener connection). */
const WAIT_POLL_MS = 1000;

/** The run once it has finished (whichever process ran it), or as it is after `timeoutMs` of real time. */
async function waitForRun(deps: Deps, runId: string, timeoutMs: number): Promise<RunRow | undefined> {
  const deadline = performance.now() + timeoutMs;
  let wake: () => void = () => {};
  const unsubscribe = deps.signals.subscribe((signal) => {
    if (signal === `run:${runId}`) wake();
  });
  try {
    for (;;) {
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const run = await findRunById(deps.db, runId);
      const left = deadline - performance.now();
      if (run === undefined || run.status === 'succeeded' || run.status === 'failed' || left <= 0) return run;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(WAIT_POLL_MS, left))))]);
      clearTimeout(timer);
    }
  } finally {
    unsubscribe();
  }
}

/**
 * The machine's own MCP endpoint: spec 5 rule 2 says a machine token cannot
 * stop anything, so only the owner's credentials may ask for stopAfter.
 * @throws AppError 403 forbidden for stopAfter with a machine token; as runAndWait otherwise.
 */
export async function runForMachineCaller(
  deps: Deps,
  provider: MachineProvider,
  caller: { accountId: string; viaMachineToken: boolean },
  machineId: string,
  input: ManualRun,
): Promise<RunView> {
  if (input.stopAfter && caller.viaMachineToken) {
    throw forbidden("A machine token cannot stop its machine: stopAfter needs the owner's API key.");
  }
  return runAndWait(deps, provider, caller.accountId, machineId, input);
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
