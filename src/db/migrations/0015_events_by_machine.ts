import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../connect.ts';
import type { DB } from '../database.ts';

/**
 * Events by machine (issue 38): each event keeps the machine it is about
 * (`data.machine.id`, in machine.* and run.* events) in a column of its own,
 * so a machine's events are one walk of a partial index (most events name a
 * machine, but not all: the index leaves the others out). Events stored
 * before take it from their envelope.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('events').addColumn('machine_id', 'text').execute();
  const fromPayload = dialectOf(db as unknown as Kysely<DB>) === 'postgres'
    ? sql`(payload::jsonb #>> '{data,machine,id}')`
    : sql`json_extract(payload, '$.data.machine.id')`;
  await sql`update events set machine_id = ${fromPayload}`.execute(db);
  await db.schema.createIndex('events_machine').on('events').columns(['machine_id', 'id']).where(sql.ref('machine_id'), 'is not', null).execute();
}
