import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { InboundWebhookReceiptsTable, InboundWebhooksTable } from './runs.tables.ts';

export type InboundWebhookRow = InboundWebhooksTable;

/** The inbound webhook record of the HTTP API (never its URL token or its secret). */
export interface InboundWebhookView {
  id: string;
  machineId: string;
  name: string;
  command: string;
  stopAfter: boolean;
  lastTriggeredAt: string | null;
  createdAt: string;
}

export function toInboundWebhookView(row: InboundWebhookRow): InboundWebhookView {
  return {
    id: row.id,
    machineId: row.machine_id,
    name: row.name,
    command: row.command,
    stopAfter: row.stop_after === 1,
    lastTriggeredAt: toIsoOrNull(row.last_triggered_at),
    createdAt: toIso(row.created_at),
  };
}

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

export async function deleteInboundWebhookRow(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('inbound_webhooks').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function recordInboundWebhookUse(db: Kysely<DB>, id: string, now: number): Promise<void> {
  await db.updateTable('inbound_webhooks').set({ last_triggered_at: now }).where('id', '=', id).execute();
}

/**
 * Remembers a signed request; its primary key (hook, signature) makes a
 * second insert of the same request a unique violation, on both engines and
 * across processes, even when both arrive at once.
 */
export async function insertReceipt(db: Kysely<DB>, row: InboundWebhookReceiptsTable): Promise<void> {
  await db.insertInto('inbound_webhook_receipts').values(row).execute();
}

export async function findReceipt(db: Kysely<DB>, hookId: string, signature: string): Promise<InboundWebhookReceiptsTable | undefined> {
  return db.selectFrom('inbound_webhook_receipts').selectAll().where('hook_id', '=', hookId).where('signature', '=', signature).executeTakeFirst();
}

/** Receipts whose signature can no longer pass the timestamp check: nothing left to guard. */
export async function deleteExpiredReceipts(db: Kysely<DB>, now: number): Promise<void> {
  await db.deleteFrom('inbound_webhook_receipts').where('expires_at', '<', now).execute();
}
