import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import type { HostState, HostsTable } from './hosts.tables.ts';

export type HostRow = HostsTable;

/** The statuses in which a machine holds its size on its host: it runs, or will, or is frozen with its memory. */
export const PLACED_STATUSES = ['starting', 'running', 'paused', 'stopping'] as const;

export async function listHosts(db: Kysely<DB>): Promise<HostRow[]> {
  return db.selectFrom('hosts').selectAll().orderBy('name').execute();
}

export async function findHost(db: Kysely<DB>, name: string): Promise<HostRow | undefined> {
  return db.selectFrom('hosts').selectAll().where('name', '=', name).executeTakeFirst();
}

export async function insertHost(db: Kysely<DB>, row: HostRow): Promise<void> {
  await db.insertInto('hosts').values(row).execute();
}

/** A host added again (MACHINE_HOSTS at each start): its address, labels and capacity as now said; its state kept. */
export async function upsertHost(db: Kysely<DB>, row: HostRow): Promise<void> {
  await db
    .insertInto('hosts')
    .values(row)
    .onConflict((conflict) => conflict.column('name').doUpdateSet({ address: row.address, labels: row.labels, cpus: row.cpus, memory_bytes: row.memory_bytes, disk_bytes: row.disk_bytes }))
    .execute();
}

/**
 * A compare-and-set of the host's state (false: it already was so). Draining
 * it records that the operator drained it, and only making it active again
 * forgets that; `lost` keeps it, for returnHost.
 */
export async function setHostState(db: Kysely<DB>, name: string, state: HostState, now: number): Promise<boolean> {
  const drained = state === 'draining' ? { drained: 1 } : state === 'active' ? { drained: 0 } : {};
  const result = await db.updateTable('hosts').set({ state, state_changed_at: now, ...drained }).where('name', '=', name).where('state', '!=', state).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * A lost host answers again: it returns to what the operator left it,
 * `draining` if drained, else `active`. False when it was not lost (another
 * process brought it back first).
 */
export async function returnHost(db: Kysely<DB>, name: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('hosts')
    .set({ state: sql<HostState>`case when drained = 1 then 'draining' else 'active' end`, state_changed_at: now })
    .where('name', '=', name)
    .where('state', '=', 'lost')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** The engine answered now (only ever forward: processes record their sightings in any order). */
export async function setHostSeen(db: Kysely<DB>, name: string, now: number): Promise<void> {
  await db.updateTable('hosts').set({ last_seen_at: now }).where('name', '=', name).where((eb) => eb.or([eb('last_seen_at', 'is', null), eb('last_seen_at', '<', now)])).execute();
}

export async function deleteHost(db: Kysely<DB>, name: string): Promise<void> {
  await db.deleteFrom('hosts').where('name', '=', name).execute();
}

/** How many machines of each size each host holds (PLACED_STATUSES, and those moving there to run), for placement and the operators' list. */
export async function placedSizes(db: Kysely<DB>): Promise<{ host: string; size: string; count: number }[]> {
  const rows = await db
    .selectFrom('machines')
    .select(['host', 'size', sql<number>`count(*)`.as('count')])
    .where('status', 'in', [...PLACED_STATUSES])
    .where('host', 'is not', null)
    .groupBy(['host', 'size'])
    .execute();
  // A machine being moved off a draining host to run on another holds its size there already: two moves, or a move
  // and a new machine, never fill one host past its capacity between them.
  const arriving = await db
    .selectFrom('machine_moves')
    .innerJoin('machines', 'machines.id', 'machine_moves.machine_id')
    .select(['machine_moves.to_host as host', 'machines.size as size', sql<number>`count(*)`.as('count')])
    .where('machine_moves.step', '=', 'copying')
    .where('machine_moves.prior_status', 'in', ['running', 'starting'])
    .where('machine_moves.to_host', 'is not', null)
    .groupBy(['machine_moves.to_host', 'machines.size'])
    .execute();
  return [...rows, ...arriving].map((row) => ({ host: row.host!, size: row.size, count: Number(row.count) }));
}

/** Machines on a host that are not destroyed, whatever their state: a host holding any cannot be removed. */
export async function countMachinesOn(db: Kysely<DB>, host: string): Promise<number> {
  const row = await db.selectFrom('machines').select(sql<number>`count(*)`.as('count')).where('host', '=', host).where('status', '!=', 'destroyed').executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Templates whose disk is on a host: a host holding any cannot be removed. */
export async function countTemplatesOn(db: Kysely<DB>, host: string): Promise<number> {
  const row = await db.selectFrom('templates').select(sql<number>`count(*)`.as('count')).where('host', '=', host).executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Moves a template's record to the host its disk was copied to, unless it names another than `from` by now. */
export async function moveTemplateRecord(db: Kysely<DB>, templateId: string, from: string, to: string): Promise<void> {
  await db.updateTable('templates').set({ host: to }).where('id', '=', templateId).where('host', '=', from).execute();
}

/**
 * Serialises placements until the transaction ends: on PostgreSQL the active
 * hosts' rows are locked, so a second process placing at once waits and then
 * counts the first one's machine. SQLite needs nothing: its write transactions
 * already run one at a time.
 */
export async function lockHostsForPlacement(db: Kysely<DB>): Promise<void> {
  if (dialectOf(db) === 'postgres') await sql`select name from hosts where state = 'active' order by name for update`.execute(db);
}
