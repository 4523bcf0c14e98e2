import type { Tx } from '../db/transaction.ts';
import { announce } from '../db/signals.ts';
import { emitEvent } from '../event-webhooks/outbox.ts';
import { runMachineSummary } from '../machines/machine-events.ts';
import { recordActivity, type MachineRow } from '../machines/machines.repository.ts';
import type { Deps } from '../deps.ts';
import { pendingRunsOf, updateRunIf, type RunRow } from './runs.repository.ts';
import type { RunStatus } from './runs.tables.ts';

/** Run events carry the first 2,000 characters of the output. */
export const EVENT_OUTPUT_CHARACTERS = 2000;

/** Cut by code points, so a character outside the BMP is never split in half. */
export function firstCharacters(text: string, count: number): string {
  if (text.length <= count) return text;
  return Array.from(text).slice(0, count).join('');
}

/** The run summary inside `run.*` events. */
export function runSummary(run: RunRow, status: RunStatus, output: string) {
  return { id: run.id, source: run.source, sourceId: run.source_id, status, output: firstCharacters(output, EVENT_OUTPUT_CHARACTERS) };
}

/** How a run ended: what the machine said (each stream apart where it ran), or why it never ran (output only). */
export interface RunOutcome {
  exitCode: number | null;
  output: string;
  stdout?: string;
  stderr?: string;
  truncated?: boolean;
  timedOut?: boolean;
}

/**
 * Finishes a run that is `from` (pending or running) and emits `run.succeeded`
 * or `run.failed` in the same transaction; whoever waits for it hears so. False
 * when it is no longer `from` (another process finished it first).
 */
export async function completeRun(
  deps: Deps,
  tx: Tx,
  run: RunRow,
  from: 'pending' | 'running',
  machine: MachineRow,
  outcome: RunOutcome,
): Promise<boolean> {
  const status: RunStatus = outcome.exitCode === 0 ? 'succeeded' : 'failed';
  const now = deps.clock.now();
  // A run's end is activity (activity.ts): the machine's idle time counts from here. The machine's row before the
  // run's, the order every state change of a machine takes them in (markStopped fails its pending runs).
  await recordActivity(tx.db, run.machine_id, now);
  const changed = await updateRunIf(
    tx.db,
    run.id,
    from,
    {
      status,
      exit_code: outcome.exitCode,
      output: outcome.output,
      stdout: outcome.stdout ?? null,
      stderr: outcome.stderr ?? null,
      truncated: outcome.truncated ? 1 : 0,
      timed_out: outcome.timedOut ? 1 : 0,
      started_at: run.started_at ?? now,
      finished_at: now,
    },
  );
  if (!changed) return false;
  await announce(deps.signals, tx, `run:${run.id}`);
  await emitEvent(deps, tx, {
    accountId: run.account_id,
    type: status === 'succeeded' ? 'run.succeeded' : 'run.failed',
    data: { run: runSummary(run, status, outcome.output), machine: runMachineSummary(machine) },
  });
  return true;
}

/** Runs still waiting for a machine that will not come up fail, with the reason as their output. */
export async function failPendingRuns(deps: Deps, tx: Tx, machine: MachineRow, reason: string): Promise<void> {
  for (const run of await pendingRunsOf(tx.db, machine.id)) {
    await completeRun(deps, tx, run, 'pending', machine, { exitCode: null, output: reason });
  }
}
