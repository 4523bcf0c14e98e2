import { Cron } from 'croner';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { MachineProvider } from '../machines/provider.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import { scheduleNotFound } from './runs.errors.ts';
import { executeRun, queueRun } from './runs.service.ts';
import {
  claimScheduleTick,
  dueSchedules,
  findSchedule,
  insertSchedule,
  listScheduleRows,
  type ScheduleRow,
} from './schedules.repository.ts';

export interface ScheduleView {
  id: string;
  machineId: string;
  name: string;
  cron: string;
  command: string;
  stopAfter: boolean;
  nextRunAt: string;
  lastRunAt: string | null;
  createdAt: string;
}

function toScheduleView(row: ScheduleRow): ScheduleView {
  return {
    id: row.id,
    machineId: row.machine_id,
    name: row.name,
    cron: row.cron,
    command: row.command,
    stopAfter: row.stop_after === 1,
    nextRunAt: toIso(row.next_run_at),
    lastRunAt: toIsoOrNull(row.last_run_at),
    createdAt: toIso(row.created_at),
  };
}

/** Classic five-field cron (minute precision), in UTC. @throws AppError 400 for an expression croner refuses. */
function parseCron(expression: string): Cron {
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
 * @throws AppError 400 bad cron or blank name, 404 unknown machine, 409 invalid_state for a destroyed machine.
 */
export async function createSchedule(
  deps: Deps,
  accountId: string,
  input: { machineId: string; name: string; cron: string; command: string; stopAfter?: boolean | undefined },
): Promise<ScheduleView> {
  const name = input.name.trim();
  if (name === '') throw invalidRequest('name must not be blank.');
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

/**
 * Fires every due schedule once. Ticks missed while no worker ran are not
 * replayed: a late schedule fires once, and its next tick is the first one
 * after now.
 */
export async function fireDueSchedules(deps: Deps, provider: MachineProvider, limit = 100): Promise<void> {
  const now = deps.clock.now();
  for (const schedule of await dueSchedules(deps.db, now, limit)) {
    const queued = await inTransaction(deps.db, async (tx) => {
      if (!(await claimScheduleTick(tx.db, schedule, nextTick(schedule.cron, now), now))) return null;
      const machine = await findMachineById(tx.db, schedule.machine_id);
      if (machine === undefined) return null;
      return queueRun(deps, provider, tx, machine, {
        source: 'schedule',
        sourceId: schedule.id,
        sourceName: schedule.name,
        command: schedule.command,
        stopAfter: schedule.stop_after === 1,
      });
    });
    if (queued?.executeNow) await executeRun(deps, provider, queued.run.id);
  }
}
