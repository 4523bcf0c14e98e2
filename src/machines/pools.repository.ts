import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso } from '../shared/clock.ts';
import { WARM_STATUSES } from './machines.repository.ts';
import type { PoolsTable } from './machines.tables.ts';

export type PoolRow = PoolsTable;

/** The pool record of the HTTP API; `ready` counts its booted, unclaimed machines. */
export interface PoolView {
  id: string;
  name: string;
  size: string;
  count: number;
  ready: number;
  /** The template its machines start from, or null. */
  template: string | null;
  createdAt: string;
}

export function toPoolView(row: PoolRow, ready: number): PoolView {
  return { id: row.id, name: row.name, size: row.size, count: row.count, ready, template: row.template_id, createdAt: toIso(row.created_at) };
}

export async function insertPool(db: Kysely<DB>, row: PoolRow): Promise<void> {
  await db.insertInto('pools').values(row).execute();
}

export async function findPool(db: Kysely<DB>, accountId: string, id: string): Promise<PoolRow | undefined> {
  return db.selectFrom('pools').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** By id or by name: `POST /api/machines` takes either. */
export async function findPoolByRef(db: Kysely<DB>, accountId: string, ref: string): Promise<PoolRow | undefined> {
  return db
    .selectFrom('pools')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('id', '=', ref), eb('name', '=', ref)]))
    .orderBy('id')
    .executeTakeFirst();
}

export async function listPoolRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined): Promise<PoolRow[]> {
  let query = db.selectFrom('pools').selectAll().where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/** Booted, unclaimed machines per pool. */
export async function readyCounts(db: Kysely<DB>, poolIds: string[]): Promise<Map<string, number>> {
  if (poolIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('machines')
    .select(['pool_id', (eb) => eb.fn.countAll<number | string>().as('ready')])
    .where('pool_id', 'in', poolIds)
    .where('status', '=', 'running')
    .groupBy('pool_id')
    .execute();
  return new Map(rows.map((row) => [row.pool_id!, Number(row.ready)]));
}

/**
 * Takes the pool's row lock (an update of its version), so that refills of one
 * pool run one at a time across processes: Postgres queues the second on the
 * row lock, SQLite's `begin immediate` on the database. Undefined once deleted.
 */
export async function lockPool(db: Kysely<DB>, poolId: string): Promise<PoolRow | undefined> {
  await db.updateTable('pools').set((eb) => ({ version: eb('version', '+', 1) })).where('id', '=', poolId).execute();
  return db.selectFrom('pools').selectAll().where('id', '=', poolId).executeTakeFirst();
}

export async function updatePoolCount(db: Kysely<DB>, poolId: string, count: number, now: number): Promise<void> {
  await db.updateTable('pools').set({ count, updated_at: now }).where('id', '=', poolId).execute();
}

export async function deletePoolRow(db: Kysely<DB>, poolId: string): Promise<void> {
  await db.deleteFrom('pools').where('id', '=', poolId).execute();
}
