import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { SchedulesTable } from './runs.tables.ts';

export type ScheduleRow = SchedulesTable;

/** The schedule record of the HTTP API. */
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

export function toScheduleView(row: ScheduleRow): ScheduleView {
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

export async function insertSchedule(db: Kysely<DB>, row: ScheduleRow): Promise<void> {
  await db.insertInto('schedules').values(row).execute();
}

export async function findSchedule(db: Kysely<DB>, accountId: string, id: string): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function listScheduleRows(
  db: Kysely<DB>,
  accountId: string,
  options: { limit: number; before: string | undefined; machineId: string | undefined },
): Promise<ScheduleRow[]> {
  let query = db.selectFrom('schedules').selectAll().where('account_id', '=', accountId);
  if (options.before !== undefined) query = query.where('id', '<', options.before);
  if (options.machineId !== undefined) query = query.where('machine_id', '=', options.machineId);
  return query.orderBy('id', 'desc').limit(options.limit).execute();
}

export async function deleteScheduleRow(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('schedules').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function findScheduleById(db: Kysely<DB>, id: string): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Claims one tick: moves next_run_at on only if it still holds the tick that
 * was read. Of several processes that saw the same due schedule, exactly one
 * gets true (Postgres re-checks the condition after waiting for the row lock).
 */
export async function claimScheduleTick(db: Kysely<DB>, schedule: ScheduleRow, nextRunAt: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('schedules')
    .set({ next_run_at: nextRunAt, last_run_at: now })
    .where('id', '=', schedule.id)
    .where('next_run_at', '=', schedule.next_run_at)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
