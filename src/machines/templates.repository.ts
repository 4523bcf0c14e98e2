import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso } from '../shared/clock.ts';
import type { TemplatesTable } from './machines.tables.ts';

export type TemplateRow = TemplatesTable;

/** The template record of the HTTP API. */
export interface TemplateView {
  id: string;
  name: string;
  /** The size of its disk as the host keeps it (with Docker, the image's, its base image included); 0 on the simulated host. */
  sizeBytes: number;
  createdAt: string;
  sourceMachineId: string;
}

export function toTemplateView(row: TemplateRow): TemplateView {
  return { id: row.id, name: row.name, sizeBytes: Number(row.size_bytes), createdAt: toIso(row.created_at), sourceMachineId: row.source_machine_id };
}

export async function insertTemplate(db: Kysely<DB>, row: TemplateRow): Promise<void> {
  await db.insertInto('templates').values(row).execute();
}

export async function findTemplate(db: Kysely<DB>, accountId: string, id: string): Promise<TemplateRow | undefined> {
  return db.selectFrom('templates').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** By id or by name: `POST /api/machines {template}` and `POST /api/pools {template}` take either. */
export async function findTemplateByRef(db: Kysely<DB>, accountId: string, ref: string): Promise<TemplateRow | undefined> {
  return db
    .selectFrom('templates')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('id', '=', ref), eb('name', '=', ref)]))
    .orderBy('id')
    .executeTakeFirst();
}

export async function listTemplateRows(db: Kysely<DB>, accountId: string, limit: number, before: string | undefined): Promise<TemplateRow[]> {
  let query = db.selectFrom('templates').selectAll().where('account_id', '=', accountId);
  if (before !== undefined) query = query.where('id', '<', before);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

export async function countTemplates(db: Kysely<DB>, accountId: string): Promise<number> {
  const { count } = await db.selectFrom('templates').select((eb) => eb.fn.countAll<number | string>().as('count')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(count);
}

/** The names of the pools that make their machines from the template. */
export async function poolsUsingTemplate(db: Kysely<DB>, templateId: string): Promise<string[]> {
  const rows = await db.selectFrom('pools').select('name').where('template_id', '=', templateId).orderBy('name').execute();
  return rows.map((row) => row.name);
}

export async function deleteTemplateRow(db: Kysely<DB>, id: string): Promise<void> {
  await db.deleteFrom('templates').where('id', '=', id).execute();
}
