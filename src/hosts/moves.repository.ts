import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { MachineMovesTable, MoveStep } from './hosts.tables.ts';

export type MoveRow = MachineMovesTable;

/** Steps of a move still under way: a move in one of them holds its machine. */
export const UNFINISHED_MOVE_STEPS = ['waiting', 'copying', 'committed'] as const satisfies readonly MoveStep[];

export async function findMove(db: Kysely<DB>, machineId: string): Promise<MoveRow | undefined> {
  return db.selectFrom('machine_moves').selectAll().where('machine_id', '=', machineId).executeTakeFirst();
}

/** A new move for the machine, or the machine's finished one (done, failed) begun again; one under way is left as it is. Answers whether it was recorded. */
export async function recordMove(db: Kysely<DB>, machineId: string, fromHost: string, now: number): Promise<boolean> {
  const existing = await findMove(db, machineId);
  const fresh = { from_host: fromHost, to_host: null, step: 'waiting' as const, prior_status: null, prior_status_changed_at: null, outcome: null, updated_at: now };
  if (existing === undefined) {
    await db.insertInto('machine_moves').values({ machine_id: machineId, ...fresh, created_at: now }).execute();
    return true;
  }
  if ((UNFINISHED_MOVE_STEPS as readonly string[]).includes(existing.step)) return false;
  await db.updateTable('machine_moves').set({ ...fresh, created_at: now }).where('machine_id', '=', machineId).where('step', '=', existing.step).execute();
  return true;
}

/** Moves the record from one step to the next; false when it was not at `from` any more (another process moved it on). */
export async function advanceMove(db: Kysely<DB>, machineId: string, from: MoveStep, changes: Partial<Omit<MoveRow, 'machine_id' | 'created_at'>> & { step: MoveStep }, now: number): Promise<boolean> {
  const result = await db.updateTable('machine_moves').set({ ...changes, updated_at: now }).where('machine_id', '=', machineId).where('step', '=', from).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** These machines' moves: what `drain --move` prints as it waits. */
export async function movesOf(db: Kysely<DB>, machineIds: readonly string[]): Promise<MoveRow[]> {
  if (machineIds.length === 0) return [];
  return db.selectFrom('machine_moves').selectAll().where('machine_id', 'in', [...machineIds]).orderBy('machine_id').execute();
}
