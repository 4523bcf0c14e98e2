import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { InboundWebhooksTable } from './runs.tables.ts';

export type InboundWebhookRow = InboundWebhooksTable;

export async function insertInboundWebhook(db: Kysely<DB>, row: InboundWebhookRow): Promise<void> {
  await db.insertInto('inbound_webhooks').values(row).execute();
}

export async function findInboundWebhook(db: Kysely<DB>, accountId: string, id: string): Promise<InboundWebhookRow | undefined> {
  return db.selectFrom('inbound_webhooks').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function findInboundWebhookByTokenHash(db: Kysely<DB>, tokenHash: string): Promise<InboundWebhookRow | undefined> {
  return db.selectFrom('inbound_webhooks').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

export async function listInboundWebhookRows(
  db: Kysely<DB>,
  accountId: string,
  options: { limit: number; before: string | undefined; machineId: string | undefined },
): Promise<InboundWebhookRow[]> {
  let query = db.selectFrom('inbound_webhooks').selectAll().where('account_id', '=', accountId);
  if (options.before !== undefined) query = query.where('id', '<', options.before);
  if (options.machineId !== undefined) query = query.where('machine_id', '=', options.machineId);
  return query.orderBy('id', 'desc').limit(options.limit).execute();
}

export async function deleteInboundWebhook(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('inbound_webhooks').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function recordInboundWebhookUse(db: Kysely<DB>, id: string, now: number): Promise<void> {
  await db.updateTable('inbound_webhooks').set({ last_triggered_at: now }).where('id', '=', id).execute();
}
