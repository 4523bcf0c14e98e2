import { Cron } from 'croner';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { checkName } from '../machines/names.ts';
import type { MachineProvider } from '../machines/provider.ts';
import { retryDelayMs } from '../machines/retry.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import type { RunExecutor } from './run-executor.ts';
import { scheduleNotFound } from './runs.errors.ts';
import { queueRun } from './runs.service.ts';
import {
  claimScheduleTick,
  deleteScheduleRow,
  dueSchedules,
  findSchedule,
  insertSchedule,
  listScheduleRows,
  postponeScheduleTick,
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
    failures: 0,
    created_at: now,
  };
  await insertSchedule(deps.db, row);
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
  if (!(await deleteScheduleRow(deps.db, accountId, id))) throw scheduleNotFound();
}

/**
 * Queues the run of every due schedule, once per tick; the runs execute in
 * the background (never in this pass). Ticks missed while no worker ran are
 * not replayed: a late schedule fires once, and its next tick is the first
 * one after now. A schedule whose tick fails is logged and tried again after
 * a growing delay, without holding up the others.
 */
export async function fireDueSchedules(deps: Deps, provider: MachineProvider, executor: RunExecutor, limit = 100): Promise<void> {
  const now = deps.clock.now();
  for (const schedule of await dueSchedules(deps.db, now, limit)) {
    try {
      await inTransaction(deps.db, async (tx) => {
        if (!(await claimScheduleTick(tx.db, schedule, nextTick(schedule.cron, now), now))) return;
        const machine = await findMachineById(tx.db, schedule.machine_id);
        if (machine === undefined) return;
        await queueRun(deps, provider, executor, tx, machine, {
          source: 'schedule',
          sourceId: schedule.id,
          sourceName: schedule.name,
          command: schedule.command,
          stopAfter: schedule.stop_after === 1,
        });
      });
    } catch (err) {
      const failures = schedule.failures + 1;
      const retryAt = now + retryDelayMs(failures);
      deps.logger.error({ err, scheduleId: schedule.id, machineId: schedule.machine_id, failures, retryAt }, 'a schedule could not fire; retrying later');
      await postponeScheduleTick(deps.db, schedule, retryAt, failures).catch((error: unknown) =>
        deps.logger.error({ err: error, scheduleId: schedule.id }, 'could not postpone a failed schedule'),
      );
    }
  }
}
