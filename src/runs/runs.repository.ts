import type { Kysely, Updateable } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { RunSource, RunStatus, RunsTable } from './runs.tables.ts';

export type RunRow = RunsTable;

/** The run record of the HTTP API. */
export interface RunView {
  id: string;
  machineId: string;
  source: RunSource;
  sourceId: string | null;
  command: string;
  stopAfter: boolean;
  status: RunStatus;
  exitCode: number | null;
  output: string | null;
  stdout: string | null;
  stderr: string | null;
  truncated: boolean;
  timedOut: boolean;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export function toRunView(row: RunRow): RunView {
  return {
    id: row.id,
    machineId: row.machine_id,
    source: row.source,
    sourceId: row.source_id,
    command: row.command,
    stopAfter: row.stop_after === 1,
    status: row.status,
    exitCode: row.exit_code,
    output: row.output,
    stdout: row.stdout,
    stderr: row.stderr,
    truncated: row.truncated === 1,
    timedOut: row.timed_out === 1,
    createdAt: toIso(row.created_at),
    startedAt: toIsoOrNull(row.started_at),
    finishedAt: toIsoOrNull(row.finished_at),
  };
}

export async function insertRun(db: Kysely<DB>, row: RunRow): Promise<void> {
  await db.insertInto('runs').values(row).execute();
}

export async function findRun(db: Kysely<DB>, accountId: string, id: string): Promise<RunRow | undefined> {
  return db.selectFrom('runs').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function findRunById(db: Kysely<DB>, id: string): Promise<RunRow | undefined> {
  return db.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listRunRows(db: Kysely<DB>, machineId: string, limit: number, before: string | undefined): Promise<RunRow[]> {
  let query = db.selectFrom('runs').selectAll().where('machine_id', '=', machineId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/** Compare-and-set on the run's status: the one process that moves it on owns the next step. */
export async function updateRunIf(db: Kysely<DB>, id: string, expected: RunStatus, changes: Updateable<RunsTable>): Promise<boolean> {
  const result = await db.updateTable('runs').set(changes).where('id', '=', id).where('status', '=', expected).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Takes a pending run: false when another process (or an earlier attempt) took it first. */
export async function claimRun(db: Kysely<DB>, id: string, now: number): Promise<boolean> {
  return updateRunIf(db, id, 'pending', { status: 'running', started_at: now });
}

export async function pendingRunsOf(db: Kysely<DB>, machineId: string): Promise<RunRow[]> {
  return db.selectFrom('runs').selectAll().where('machine_id', '=', machineId).where('status', '=', 'pending').orderBy('id').execute();
}

/** Finished runs made before `before`, a batch for retention: their ids after `after`, in order (ids grow with time). */
export async function finishedRunIdsBefore(db: Kysely<DB>, before: string, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('runs').select('id').where('id', '<', before).where('status', 'in', ['succeeded', 'failed']);
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

export async function deleteFinishedRuns(db: Kysely<DB>, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.deleteFrom('runs').where('id', 'in', ids).where('status', 'in', ['succeeded', 'failed']).executeTakeFirst();
  return Number(result.numDeletedRows);
}
