import { Cron } from 'croner';
import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import type { Outcome } from '../jobs/job-kind.ts';
import { newId } from '../shared/ids.ts';
import { scheduleTickJob } from './job-types.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { checkName } from '../machines/names.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { scheduleNotFound } from './runs.errors.ts';
import { queueRun } from './runs.service.ts';
import {
  claimScheduleTick,
  deleteScheduleRow,
  findSchedule,
  findScheduleById,
  insertSchedule,
  listScheduleRows,
  toScheduleView,
  type ScheduleRow,
  type ScheduleView,
} from './schedules.repository.ts';

/** One field: `*` or a number or a range, optionally with a step; a list is several of these. */
const CRON_ITEM = String.raw`(?:\*|\d{1,2}(?:-\d{1,2})?)(?:/\d{1,2})?`;
const CRON_FIELD = new RegExp(`^${CRON_ITEM}(?:,${CRON_ITEM})*$`);

/**
 * Classic five-field cron (minute, hour, day of month, month, day of week),
 * evaluated in UTC whatever the host's time zone. Only the portable syntax is
 * taken, numbers, `*`, ranges, lists and steps, so an expression means the same
 * in any cron: croner's extensions (`@daily`, `?`, `L`, `#`, `W`, names) are refused.
 * @throws AppError 400 for anything else, or values out of range.
 */
function parseCron(expression: string): Cron {
  const fields = expression.split(/\s+/);
  if (fields.length !== 5 || !fields.every((field) => CRON_FIELD.test(field))) {
    throw invalidRequest('cron must be five fields (minute hour day-of-month month day-of-week) of numbers, *, ranges (1-5), lists (1,15) and steps (*/10).');
  }
  try {
    return new Cron(expression, { timezone: 'UTC', mode: '5-part', paused: true });
  } catch (error) {
    throw invalidRequest(`cron is not a valid five-field cron expression: ${(error as Error).message}`);
  }
}

/** The first tick strictly after `after`; far-future when the expression never fires again. */
function nextTick(cron: string, after: number): number {
  const next = parseCron(cron).nextRun(new Date(after));
  return next === null ? Number.MAX_SAFE_INTEGER : next.getTime();
}

/**
 * @throws AppError 400 bad cron or bad name, 404 unknown machine, 409 invalid_state for a destroyed machine.
 */
export async function createSchedule(
  deps: Deps,
  accountId: string,
  input: { machineId: string; name: string; cron: string; command: string; stopAfter?: boolean | undefined },
): Promise<ScheduleView> {
  const name = checkName(input.name);
  const cron = input.cron.trim();
  const parsed = parseCron(cron);
  const machine = await getMachineRow(deps, accountId, input.machineId);
  if (machine.status === 'destroyed') throw wrongStatus('get a schedule', machine.status);
  const now = deps.clock.now();
  const next = parsed.nextRun(new Date(now));
  if (next === null) throw invalidRequest('cron never fires.');
  const row: ScheduleRow = {
    id: newId('sch', now),
    account_id: accountId,
    machine_id: machine.id,
    name,
    cron,
    command: input.command,
    stop_after: input.stopAfter ? 1 : 0,
    next_run_at: next.getTime(),
    last_run_at: null,
    created_at: now,
  };
  await inTransaction(deps.database, async (tx) => {
    await insertSchedule(tx.db, row);
    await deps.jobs.schedule(tx, scheduleTickJob, row.id, { scheduleId: row.id }, row.next_run_at);
  });
  return toScheduleView(row);
}

/** @throws AppError 404 for an unknown schedule or another account's. */
export async function getSchedule(deps: Deps, accountId: string, id: string): Promise<ScheduleView> {
  const row = await findSchedule(deps.db, accountId, id);
  if (row === undefined) throw scheduleNotFound();
  return toScheduleView(row);
}

export async function listSchedules(
  deps: Deps,
  accountId: string,
  options: { limit: number; cursor: string | undefined; machineId: string | undefined },
): Promise<ScheduleView[]> {
  return (await listScheduleRows(deps.db, accountId, { limit: options.limit, before: options.cursor, machineId: options.machineId })).map(toScheduleView);
}

/** @throws AppError 404 for an unknown schedule or another account's. */
export async function deleteSchedule(deps: Deps, accountId: string, id: string): Promise<void> {
  const deleted = await inTransaction(deps.database, async (tx) => {
    if (!(await deleteScheduleRow(tx.db, accountId, id))) return false;
    await deps.jobs.cancel(tx, scheduleTickJob, id);
    return true;
  });
  if (!deleted) throw scheduleNotFound();
}

/**
 * A schedule's tick job: queues the run, once per tick (the run executes in
 * its own job), and answers when the next tick is due. Ticks missed while no
 * process ran jobs are not replayed: a late schedule fires once, and its next
 * tick is the first one after now. A tick that fails is retried by the job's
 * policy, without holding up the others.
 */
export async function fireSchedule(deps: Deps, provider: MachineProvider, scheduleId: string): Promise<Outcome> {
  const schedule = await findScheduleById(deps.db, scheduleId);
  // Deleted, with its machine or on its own: no more ticks.
  if (schedule === undefined) return { status: 'done' };
  const now = deps.clock.now();
  const next = nextTick(schedule.cron, now);
  await inTransaction(deps.database, async (tx) => {
    if (!(await claimScheduleTick(tx.db, schedule, next, now))) return;
    const machine = await findMachineById(tx.db, schedule.machine_id);
    if (machine === undefined) return;
    await queueRun(deps, provider, tx, machine, {
      source: 'schedule',
      sourceId: schedule.id,
      sourceName: schedule.name,
      command: schedule.command,
      stopAfter: schedule.stop_after === 1,
    });
  });
  return next === Number.MAX_SAFE_INTEGER ? { status: 'done' } : { status: 'later', at: next };
}
