import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';

/** A destroyed machine runs nothing more: its schedules and inbound webhooks go with it. */
export async function deleteTriggersOfMachine(db: Kysely<DB>, machineId: string): Promise<void> {
  await db.deleteFrom('schedules').where('machine_id', '=', machineId).execute();
  await db.deleteFrom('inbound_webhooks').where('machine_id', '=', machineId).execute();
}
