import { sql, type Kysely } from 'kysely';

/**
 * Event history (issue 12): every attempt of a delivery kept in an attempt
 * log; at most one delivery per event and endpoint (what makes a replay
 * idempotent); the events of an account walked by type; an endpoint's
 * failing clock and the reason it was disabled.
 * SQLite adds one column per ALTER TABLE, hence one statement each.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('delivery_attempts')
    .addColumn('delivery_id', 'text', (col) => col.notNull().references('deliveries.id').onDelete('cascade'))
    /** 1 for the delivery's first attempt ever: its `attempts` once this one is counted. */
    .addColumn('n', 'integer', (col) => col.notNull())
    .addColumn('endpoint_id', 'text', (col) => col.notNull())
    .addColumn('at', 'bigint', (col) => col.notNull())
    .addColumn('ok', 'integer', (col) => col.notNull())
    .addColumn('status', 'integer')
    .addColumn('duration_ms', 'integer', (col) => col.notNull())
    .addColumn('error', 'text')
    .addColumn('body', 'text')
    .addPrimaryKeyConstraint('delivery_attempts_pk', ['delivery_id', 'n'])
    .execute();
  // The auto-disable check: an endpoint's attempts by time.
  await db.schema.createIndex('delivery_attempts_endpoint_at').on('delivery_attempts').columns(['endpoint_id', 'at']).execute();

  // One delivery per event and endpoint: concurrent replays cannot both add one. Event first: inserts append (ids grow with time).
  await db.schema.createIndex('deliveries_event_endpoint').on('deliveries').columns(['event_id', 'endpoint_id']).unique().execute();
  // Recovered and replayed deliveries not yet handed to their lane (pending, nothing due yet): the feeder's queue.
  await db.schema
    .createIndex('deliveries_unqueued')
    .on('deliveries')
    .columns(['endpoint_id', 'id'])
    .where((eb) => eb.and([eb(sql.ref('status'), '=', 'pending'), eb(sql.ref('next_attempt_at'), 'is', null)]))
    .execute();

  // An account's events newest first, by type (the unfiltered listing merges the types' walks).
  await db.schema.createIndex('events_account_type').on('events').columns(['account_id', 'type', 'id']).execute();

  await db.schema.alterTable('event_endpoints').addColumn('disabled_reason', 'text').execute();
  await db.schema.alterTable('event_endpoints').addColumn('disabled_at', 'bigint').execute();
  // The first failed attempt since the last success (null while it succeeds), and when the owner was warned of it.
  await db.schema.alterTable('event_endpoints').addColumn('failing_since', 'bigint').execute();
  await db.schema.alterTable('event_endpoints').addColumn('warned_at', 'bigint').execute();
  await db.schema.createIndex('event_endpoints_failing').on('event_endpoints').column('failing_since').where(sql.ref('failing_since'), 'is not', null).execute();
}
