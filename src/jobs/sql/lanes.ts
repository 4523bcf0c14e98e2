import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

/** A lane where jobs may be queued; open already is fine. */
export async function openLane(db: Kysely<DB>, lane: string, paused: boolean): Promise<void> {
  await db.insertInto('job_lanes').values({ lane, paused: paused ? 1 : 0 }).onConflict((conflict) => conflict.column('lane').doNothing()).execute();
}

/** A paused lane's jobs stay where they are, unclaimed, until it is resumed. */
export async function setLanePaused(db: Kysely<DB>, lane: string, paused: boolean): Promise<void> {
  await db.updateTable('job_lanes').set({ paused: paused ? 1 : 0 }).where('lane', '=', lane).execute();
}

/**
 * Closes the lane and cancels its jobs. The foreign key would delete them with
 * the lane; they go first, by name, so that the lane's row is locked last, as
 * a lane's owner's delete takes its jobs after its own rows (see
 * docs/architecture.md, "Lock order on PostgreSQL").
 */
export async function closeLane(db: Kysely<DB>, lane: string): Promise<void> {
  await db.deleteFrom('jobs').where('lane', '=', lane).execute();
  await db.deleteFrom('job_lanes').where('lane', '=', lane).execute();
}
