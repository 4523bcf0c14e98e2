import { inTransaction, type Tx } from '../db/transaction.ts';
import { balanceIsEmpty } from '../billing/enforcement.ts';
import { forbidden, notFound } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { runExecuteJob } from './job-types.ts';
import { BOOT_CALL_GRACE_MS, bootStarting, finishPending, hostIsSilent } from '../machines/machine-actions.ts';
import { markStarting, markStopping, type StopReason } from '../machines/machine-transitions.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById, toProviderMachine, type MachineRow } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { completeRun, type RunOutcome } from './run-events.ts';
import { runNotFound } from './runs.errors.ts';
import { claimRun, findRun, findRunById, insertRun, listRunRows, toRunView, type RunRow, type RunView } from './runs.repository.ts';
import type { RunSource } from './runs.tables.ts';

export const INTERRUPTED_RUN_OUTPUT = 'The run was interrupted: the machine stopped before it could say how the run ended.';

/** A host that fails while a run is under way (and answers) is asked again this many times before the run is failed for it. */
const HOST_FAILURES_PER_RUN = 4;

/** Where and how long a command runs, as a caller may ask; schedules and inbound webhooks take the defaults. */
export interface CommandOptions {
  /** Absolute; the machine's home directory when absent. */
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

export const DEFAULT_RUN_TIMEOUT_MS = 600_000;

export interface RunRequest extends CommandOptions {
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
    cwd: request.cwd ?? null,
    env: JSON.stringify(request.env ?? {}),
    timeout_ms: request.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS,
    stop_after: request.stopAfter ? 1 : 0,
    status: 'pending',
    exit_code: null,
    output: null,
    stdout: null,
    stderr: null,
    truncated: 0,
    timed_out: 0,
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
 * How the run's job went: finished (whoever recorded it), let go mid-run for
 * another attempt (this process is stopping, say), or waiting for the
 * machine's host, which does not answer (`host-silent`: asked again later).
 */
export type RunExecution = 'done' | 'released' | 'host-silent';


/**
 * The run's job: executes a pending run, once (whoever moves it from pending
 * to running owns it), records the outcome with its event and, with
 * stopAfter, stops the machine (`machine.stopped`, reason `after schedule
 * <name>`…). A run found `running` was started by a process that died or let
 * it go: the machine is asked again under the run's id, and answers with the
 * outcome it records (the command is not run twice); only a machine that
 * cannot say fails it as interrupted. `signal` lets the run go (`released`):
 * the command goes on in the machine, and the next attempt waits for it. A
 * host that stops answering under a run (lost) is waited for however long it
 * takes (`host-silent`), as after a crash of this service: once it answers,
 * the run is finished from the machine's record, never failed for the silence
 * nor run again. A destroyed machine is not waited for.
 * @throws the host's error when it failed under a run while answering, to be retried (HOST_FAILURES_PER_RUN times).
 */
export async function executeRun(deps: Deps, provider: MachineProvider, runId: string, signal: AbortSignal, failures = 0): Promise<RunExecution> {
  let run = await findRunById(deps.db, runId);
  if (run?.status === 'pending') {
    if (!(await claimRun(deps.db, runId, deps.clock.now()))) return 'done';
    run = (await findRunById(deps.db, runId))!;
    const machine = (await findMachineById(deps.db, run.machine_id))!;
    if (machine.status !== 'running') {
      await finishRun(deps, provider, run, { exitCode: null, output: `The machine is ${machine.status}; the run could not start.` });
      return 'done';
    }
  }
  if (run?.status !== 'running') return 'done';
  const machine = (await findMachineById(deps.db, run.machine_id))!;
  let outcome: RunOutcome | null;
  try {
    const spec = { id: run.id, command: run.command, cwd: run.cwd, env: JSON.parse(run.env) as Record<string, string>, timeoutMs: run.timeout_ms, startedAt: run.started_at! };
    outcome = await provider.runCommand(toProviderMachine(machine), spec, signal);
  } catch (err) {
    if (signal.aborted) return 'released';
    if ((await findMachineById(deps.db, run.machine_id))?.status !== 'destroyed' && (await hostIsSilent(provider, machine))) {
      deps.logger.info({ err, runId, machineId: machine.id, host: machine.host }, 'the host of a run does not answer: the run waits for it');
      return 'host-silent';
    }
    if (failures + 1 < HOST_FAILURES_PER_RUN) throw err;
    deps.logger.error({ err, runId }, 'the host kept failing under a run; the run is failed');
    outcome = { exitCode: null, output: 'The machine could not run the command.' };
  }
  await finishRun(deps, provider, run, outcome ?? { exitCode: null, output: INTERRUPTED_RUN_OUTPUT });
  return 'done';
}

/** Records a running run's outcome with its event, then the stop its stopAfter asks for; nothing when another process recorded it first. */
async function finishRun(deps: Deps, provider: MachineProvider, run: RunRow, outcome: RunOutcome): Promise<void> {
  const after = (await findMachineById(deps.db, run.machine_id))!;
  const stopping = await inTransaction(deps.database, async (tx) => {
    // False: another process recorded the run first (it took the run over), so neither this outcome nor its stopAfter applies.
    if (!(await completeRun(deps, tx, run, 'running', after, outcome))) return null;
    if (run.stop_after !== 1 || after.status !== 'running') return null;
    return markStopping(deps, tx, after, { action: 'stop', reason: stopReasonOf(run) });
  });
  if (stopping !== null) await finishPending(deps, provider, stopping);
}

export interface ManualRun extends CommandOptions {
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
  const run = await inTransaction(deps.database, (tx) =>
    queueRun(deps, provider, tx, machine, { ...input, source: 'manual', sourceId: null, sourceName: null }),
  );
  return toRunView(run);
}

/** How long a synchronous caller waits, and what ends its wait early (the caller went away). */
export interface RunWait {
  waitMs: number;
  signal: AbortSignal;
}

/** A run as a waiting caller gets it: finished, or as it is still (pending or running) with `runId` to wait on. */
export type WaitedRun = RunView | (RunView & { runId: string });

function waited(run: RunRow): WaitedRun {
  const view = toRunView(run);
  return run.status === 'succeeded' || run.status === 'failed' ? view : { ...view, runId: run.id };
}

/**
 * A manual run for a synchronous caller (an agent's MCP tool): queued like any
 * other, then waited for at most `wait.waitMs`; the answer is the finished run,
 * or the run as it is then (still `running`) with its `runId`. The run goes on either way.
 * @throws AppError 404 unknown machine, 409 invalid_state when it is not running.
 */
export async function runAndWait(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, input: ManualRun, wait: RunWait): Promise<WaitedRun> {
  const queued = await startManualRun(deps, provider, accountId, machineId, input);
  const run = await waitForRun(deps, queued.id, wait);
  return run === undefined ? { ...queued, runId: queued.id } : waited(run);
}

/**
 * A run of the account (and, given `machineId`, of that machine only: a machine's own endpoint sees no other's).
 * @throws AppError 404 for an unknown run, another account's or another machine's.
 */
async function findRunOf(deps: Deps, accountId: string, machineId: string | undefined, id: string): Promise<RunRow> {
  const row = await findRun(deps.db, accountId, id);
  if (row === undefined || (machineId !== undefined && row.machine_id !== machineId)) throw runNotFound();
  return row;
}

/**
 * Waits at most `wait.waitMs` for a run to finish: the finished run, or as it is then with its `runId`.
 * @throws AppError 404 for an unknown run, another account's or (given `machineId`) another machine's.
 */
export async function awaitRun(deps: Deps, accountId: string, machineId: string | undefined, id: string, wait: RunWait): Promise<WaitedRun> {
  const found = await findRunOf(deps, accountId, machineId, id);
  return waited((await waitForRun(deps, found.id, wait)) ?? found);
}

/** How often a waiter reads the run anyway, should the signal of its end be missed (a lost listener connection). */
const WAIT_POLL_MS = 1000;

/** The run once it has finished (whichever process ran it), or as it is after `waitMs` of real time or when the waiter goes away. */
async function waitForRun(deps: Deps, runId: string, { waitMs, signal }: RunWait): Promise<RunRow | undefined> {
  const deadline = performance.now() + waitMs;
  let wake: () => void = () => {};
  const unsubscribe = deps.signals.subscribe((heard) => {
    if (heard === `run:${runId}`) wake();
  });
  const onAbort = () => wake();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const run = await findRunById(deps.db, runId);
      const left = deadline - performance.now();
      if (run === undefined || run.status === 'succeeded' || run.status === 'failed' || left <= 0 || signal.aborted) return run;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(WAIT_POLL_MS, left))))]);
      clearTimeout(timer);
    }
  } finally {
    unsubscribe();
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The machine's own MCP endpoint: a machine token cannot
 * stop anything, so only the owner's credentials may ask for stopAfter.
 * @throws AppError 403 forbidden for stopAfter with a machine token; as runAndWait otherwise.
 */
export async function runForMachineCaller(
  deps: Deps,
  provider: MachineProvider,
  caller: { accountId: string; viaMachineToken: boolean },
  machineId: string,
  input: ManualRun,
  wait: RunWait,
): Promise<WaitedRun> {
  if (input.stopAfter && caller.viaMachineToken) {
    throw forbidden("A machine token cannot stop its machine: stopAfter needs the owner's API key.");
  }
  return runAndWait(deps, provider, caller.accountId, machineId, input, wait);
}

/** @throws AppError 404 for an unknown run, another account's or (given `machineId`) another machine's. */
export async function getRun(deps: Deps, accountId: string, id: string, machineId?: string): Promise<RunView> {
  return toRunView(await findRunOf(deps, accountId, machineId, id));
}

/**
 * The picture of the screen the machine took as the run ended.
 * @throws AppError 404 for an unknown run, or one with no picture (no display, still running, or no longer kept).
 */
export async function runScreenshot(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<Buffer> {
  const run = await findRun(deps.db, accountId, id);
  if (run === undefined) throw runNotFound();
  const machine = await findMachineById(deps.db, run.machine_id);
  const png = machine === undefined || machine.status === 'destroyed' || provider.runScreenshot === undefined
    ? null
    : await provider.runScreenshot(toProviderMachine(machine), run.id).catch(() => null);
  if (png === null) throw notFound('A picture of the screen for this run');
  return png;
}

/** @throws AppError 404 for an unknown machine. */
export async function listRuns(deps: Deps, accountId: string, machineId: string, limit: number, cursor: string | undefined): Promise<RunView[]> {
  await getMachineRow(deps, accountId, machineId);
  return (await listRunRows(deps.db, machineId, limit, cursor)).map(toRunView);
}
