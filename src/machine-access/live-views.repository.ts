import type { Deps } from '../deps.ts';
import type { MachineFollower } from '../machines/machine-follower.ts';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { LiveViewsTable } from '../machines/machines.tables.ts';

export async function insertLiveView(db: Kysely<DB>, row: LiveViewsTable): Promise<void> {
  await db.insertInto('live_views').values(row).execute();
}

/** The machine behind a live-view link that is still valid. */
export async function findLiveViewMachine(db: Kysely<DB>, tokenHash: string, now: number) {
  return db
    .selectFrom('live_views')
    .innerJoin('machines', 'machines.id', 'live_views.machine_id')
    .selectAll('machines')
    .where('live_views.token_hash', '=', tokenHash)
    .where('live_views.expires_at', '>', now)
    .where('machines.status', '<>', 'destroyed')
    .executeTakeFirst();
}

/** The same, with the link's own expiry. */
export async function findLiveViewLink(db: Kysely<DB>, tokenHash: string, now: number) {
  return db
    .selectFrom('live_views')
    .innerJoin('machines', 'machines.id', 'live_views.machine_id')
    .selectAll('machines')
    .select('live_views.expires_at as link_expires_at')
    .where('live_views.token_hash', '=', tokenHash)
    .where('live_views.expires_at', '>', now)
    .where('machines.status', '<>', 'destroyed')
    .executeTakeFirst();
}

export async function deleteLiveViewsOfMachine(db: Kysely<DB>, machineId: string): Promise<void> {
  await db.deleteFrom('live_views').where('machine_id', '=', machineId).execute();
}

export async function deleteExpiredLiveViews(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('live_views').where('expires_at', '<=', now).execute();
}

/** A destroyed machine's live-view links go with it. */
export const liveViewsFollowMachines: MachineFollower<Deps> = {
  destroyed: (_deps, tx, machine) => deleteLiveViewsOfMachine(tx.db, machine.id),
};
