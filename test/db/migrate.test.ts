import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts';
import { findUnqueued } from '../../src/event-webhooks/deliveries.repository.ts';
import { createTestApp, registerUser } from '../support/app.ts';
import { freshDatabase, onPostgres, TEST_DATABASE_URL } from '../support/database.ts';

test('migrations find their own bookkeeping tables, not those of another schema in the same database', { skip: !onPostgres && 'Postgres only' }, async () => {
  // Regression: Kysely looked for kysely_migration* in every schema, so a half-migrated
  // schema left by another run made every fresh schema fail with "kysely_migration_lock does not exist".
  const other = await freshDatabase();
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(`create table ${other.schema}.kysely_migration (name varchar(255) primary key, timestamp varchar(255) not null)`);
    const ctx = await createTestApp();
    try {
      const user = await registerUser(ctx);
      assert.match(user.id, /^acct_/);
    } finally {
      await ctx.close();
    }
  } finally {
    await client.end();
    await other.drop();
  }
});

test('introspection reads only our own schema, so another schema dropped meanwhile cannot fail a migration', { skip: !onPostgres && 'Postgres only' }, async () => {
  // Regression: Kysely's introspector calls pg_get_serial_sequence on the tables of every
  // schema; one dropped during the scan (another test run finishing) failed our migration
  // with "schema test_… does not exist".
  const ours = await freshDatabase();
  const other = await freshDatabase();
  const db = connectDatabase(ours.url, { schema: ours.schema }).db;
  try {
    await sql.raw(`create table ${other.schema}.elsewhere (id serial primary key)`).execute(db);
    await migrateToLatest(db);
    const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
    assert.deepEqual(new Set(tables.map((table) => table.schema)), new Set([ours.schema]));
    const names = tables.map((table) => table.name);
    assert.ok(names.includes('accounts') && names.includes('kysely_migration'), names.join());
    assert.ok(!(await db.introspection.getTables()).some((table) => table.name.startsWith('kysely_')));
  } finally {
    await db.destroy();
    await other.drop();
    await ours.drop();
  }
});

/** A fresh database migrated up to `migration` for `body`, which writes what it had and migrates on; dropped after. */
async function fromMigration(migration: string, body: (db: Kysely<DB>) => Promise<void>): Promise<void> {
  const database = await freshDatabase();
  const db = connectDatabase(database.url, { schema: database.schema }).db;
  try {
    await migrateTo(db, migration);
    await body(db);
  } finally {
    await db.destroy();
    await database.drop();
  }
}

test('0009: a recovered delivery still waiting for its lane keeps waiting, for the feeder to find, and nothing else does', async () => {
  await fromMigration('0008_oauth', async (db) => {
    const now = Date.now();
    await sql`insert into accounts (id, email, name, password_hash, email_verified_at, created_at, updated_at) values ('acct_1', 'a@example.com', 'a', 'x', null, ${now}, ${now})`.execute(db);
    await sql`insert into event_endpoints (id, account_id, url, description, events, secret, enabled, created_at, updated_at) values ('ep_1', 'acct_1', 'https://example.com/hook', '', '["*"]', 'whsec_x', 1, ${now}, ${now})`.execute(db);
    await sql`insert into events (id, account_id, type, payload, created_at) values ('evt_1', 'acct_1', 'machine.created', '{}', ${now}), ('evt_2', 'acct_1', 'machine.created', '{}', ${now}), ('evt_3', 'acct_1', 'machine.created', '{}', ${now})`.execute(db);
    // Waiting for the feeder (pending, nothing due); pending and due; finished.
    await sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) values
      ('dlv_1', 'acct_1', 'ep_1', 'evt_1', 'machine.created', 'pending', 3, null, ${now}),
      ('dlv_2', 'acct_1', 'ep_1', 'evt_2', 'machine.created', 'pending', 0, ${now}, ${now}),
      ('dlv_3', 'acct_1', 'ep_1', 'evt_3', 'machine.created', 'failed', 8, null, ${now})`.execute(db);
    await migrateToLatest(db);
    const waiting = await findUnqueued(db, 'ep_1', 10);
    assert.deepEqual(waiting.map((delivery) => delivery.deliveryId), ['dlv_1']);
  });
});

test('0010: what was stored is kept; a delivery keeps its attempt log and is of its endpoint\'s account', async () => {
  await fromMigration('0009_deliveries_in_place', async (db) => {
    const now = Date.now();
    await sql`insert into accounts (id, email, name, password_hash, email_verified_at, created_at, updated_at) values ('acct_1', 'a@example.com', 'a', 'x', null, ${now}, ${now}), ('acct_2', 'b@example.com', 'b', 'x', null, ${now}, ${now})`.execute(db);
    await sql`insert into event_endpoints (id, account_id, url, description, events, secret, enabled, created_at, updated_at) values ('ep_1', 'acct_1', 'https://example.com/hook', '', '["*"]', 'whsec_x', 1, ${now}, ${now})`.execute(db);
    await sql`insert into events (id, account_id, type, payload, created_at) values ('evt_1', 'acct_1', 'machine.created', '{}', ${now}), ('evt_2', 'acct_2', 'machine.created', '{}', ${now})`.execute(db);
    await sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) values ('dlv_1', 'acct_1', 'ep_1', 'evt_1', 'machine.created', 'pending', 1, ${now}, ${now})`.execute(db);
    await sql`insert into delivery_attempts (delivery_id, n, endpoint_id, at, ok, status, duration_ms, error, body) values ('dlv_1', 1, 'ep_1', ${now}, 0, 500, 3, null, 'down')`.execute(db);
    await sql`insert into job_lanes (lane, paused) values ('ep_1', 0)`.execute(db);
    await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, locked_by, locked_until, last_error, created_at) values ('dlv_1', 'webhook.delivery', 'ep_1', null, '{}', ${now}, 1, null, null, 'down', ${now})`.execute(db);
    await migrateToLatest(db);

    const count = async (table: 'deliveries' | 'delivery_attempts' | 'jobs' | 'job_lanes') => Number((await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(db)).rows[0]!.n);
    assert.deepEqual([await count('deliveries'), await count('delivery_attempts'), await count('jobs'), await count('job_lanes')], [1, 1, 1, 1]);
    if (onPostgres) {
      // One key to the endpoint and its account: a delivery cannot name another account than its endpoint's.
      await assert.rejects(
        sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) values ('dlv_2', 'acct_2', 'ep_1', 'evt_2', 'machine.created', 'pending', 0, ${now}, ${now})`.execute(db),
        /foreign key/,
      );
    }
    await sql`delete from deliveries where id = 'dlv_1'`.execute(db);
    assert.equal(await count('delivery_attempts'), 0, 'the attempt log went with its delivery');
  });
});

test('0015 and 0016: stored events take their machine from their envelope; the statement lines are summed from the ledger already kept', async () => {
  await fromMigration('0013_second_factor', async (db) => {
    const now = Date.UTC(2026, 10, 22, 23, 59, 0);
    await sql`insert into accounts (id, email, name, password_hash, email_verified_at, created_at, updated_at) values ('acct_1', 'a@example.com', 'a', 'x', null, ${now}, ${now})`.execute(db);
    const envelope = (id: string, data: object) => JSON.stringify({ id, type: 'machine.created', createdAt: new Date(now).toISOString(), data });
    await sql`insert into events (id, account_id, type, payload, created_at) values
      ('evt_1', 'acct_1', 'machine.created', ${envelope('evt_1', { machine: { id: 'mch_1', name: 'one' }, detail: {} })}, ${now}),
      ('evt_2', 'acct_1', 'run.failed', ${envelope('evt_2', { run: { id: 'run_1' }, machine: { id: 'mch_2' } })}, ${now}),
      ('evt_3', 'acct_1', 'webhook.test', ${envelope('evt_3', { endpointId: 'ep_1' })}, ${now})`.execute(db);
    // Two charges of mch_1 ending on the 22nd, one ending past midnight (the 23rd), one of mch_2; and a top-up.
    await sql`insert into billing_ledger (id, account_id, kind, amount_micros, balance_after_micros, machine_id, period_start, period_end, created_at) values
      ('txn_1', 'acct_1', 'top_up', 5000000, 5000000, null, null, null, ${now}),
      ('txn_2', 'acct_1', 'usage', -217, 4999783, 'mch_1', ${now - 60_000}, ${now}, ${now}),
      ('txn_3', 'acct_1', 'usage', -216, 4999567, 'mch_1', ${now}, ${now + 30_000}, ${now}),
      ('txn_4', 'acct_1', 'usage', -217, 4999350, 'mch_1', ${now + 30_000}, ${now + 90_000}, ${now}),
      ('txn_5', 'acct_1', 'usage', -5, 4999345, 'mch_2', ${now}, ${now + 1000}, ${now})`.execute(db);
    await migrateToLatest(db);

    const events = await db.selectFrom('events').select(['id', 'machine_id']).orderBy('id').execute();
    assert.deepEqual(events.map((row) => ({ ...row })), [{ id: 'evt_1', machine_id: 'mch_1' }, { id: 'evt_2', machine_id: 'mch_2' }, { id: 'evt_3', machine_id: null }]);
    const days = await db.selectFrom('billing_usage_days').selectAll().orderBy('day').orderBy('machine_id').execute();
    assert.deepEqual(days.map((row) => ({ ...row, amount_micros: Number(row.amount_micros), ms: Number(row.ms) })), [
      { account_id: 'acct_1', day: '2026-11-22', machine_id: 'mch_1', amount_micros: -433, ms: 90_000 },
      { account_id: 'acct_1', day: '2026-11-22', machine_id: 'mch_2', amount_micros: -5, ms: 1000 },
      { account_id: 'acct_1', day: '2026-11-23', machine_id: 'mch_1', amount_micros: -217, ms: 60_000 },
    ]);
  });
});

test('0022: the lane and attempt-log keys come back on PostgreSQL; rows that break them are mended, and no delivery is lost', { skip: !onPostgres && 'Postgres only (SQLite kept its keys)' }, async () => {
  await fromMigration('0021_machine_network', async (db) => {
    const now = Date.now();
    await sql`insert into accounts (id, email, name, password_hash, email_verified_at, created_at, updated_at) values ('acct_1', 'a@example.com', 'a', 'x', null, ${now}, ${now})`.execute(db);
    await sql`insert into event_endpoints (id, account_id, url, description, events, secret, enabled, created_at, updated_at) values ('ep_1', 'acct_1', 'https://example.com/hook', '', '["*"]', 'whsec_x', 0, ${now}, ${now})`.execute(db);
    await sql`insert into events (id, account_id, type, payload, created_at) values ('evt_1', 'acct_1', 'machine.created', '{}', ${now})`.execute(db);
    await sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) values ('dlv_1', 'acct_1', 'ep_1', 'evt_1', 'machine.created', 'pending', 1, ${now}, ${now})`.execute(db);
    await sql`insert into delivery_attempts (delivery_id, n, endpoint_id, at, ok, status, duration_ms, error, body) values ('dlv_1', 1, 'ep_1', ${now}, 0, 500, 3, null, 'down'), ('dlv_gone', 1, 'ep_gone', ${now}, 0, 500, 3, null, 'down')`.execute(db);
    // Without their lane rows: a paused endpoint's delivery; a delivery job of an endpoint deleted with its deliveries; a job of another kind.
    await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, locked_by, locked_until, last_error, created_at) values
      ('dlv_1', 'webhook.delivery', 'ep_1', null, '{}', ${now}, 1, null, null, 'down', ${now}),
      ('dlv_gone', 'webhook.delivery', 'ep_gone', null, '{}', ${now}, 0, null, null, null, ${now}),
      ('job_1', 'other.kind', 'lane_x', null, '{}', ${now}, 0, null, null, null, ${now})`.execute(db);
    await migrateToLatest(db);

    const lanes = await sql<{ lane: string; paused: number }>`select lane, paused from job_lanes order by lane`.execute(db);
    assert.deepEqual(lanes.rows.map((row) => ({ ...row })), [{ lane: 'ep_1', paused: 1 }, { lane: 'lane_x', paused: 0 }], "the endpoint's lane comes back paused as it is; the other lane open");
    const jobs = await sql<{ id: string }>`select id from jobs order by id`.execute(db);
    assert.deepEqual(jobs.rows.map((row) => row.id), ['dlv_1', 'job_1'], 'only the job whose subject is gone is deleted');
    const log = await sql<{ delivery_id: string }>`select delivery_id from delivery_attempts`.execute(db);
    assert.deepEqual(log.rows.map((row) => row.delivery_id), ['dlv_1'], 'only the log of a delivery gone is deleted');

    await assert.rejects(sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at) values ('job_2', 'other.kind', 'no_lane', null, '{}', ${now}, 0, ${now})`.execute(db), /foreign key/);
    await assert.rejects(sql`insert into delivery_attempts (delivery_id, n, endpoint_id, at, ok, duration_ms) values ('dlv_none', 1, 'ep_1', ${now}, 1, 3)`.execute(db), /foreign key/);
    await sql`delete from deliveries where id = 'dlv_1'`.execute(db);
    assert.equal((await sql`select 1 from delivery_attempts`.execute(db)).rows.length, 0, 'the attempt log goes with its delivery');
    await sql`delete from job_lanes where lane = 'lane_x'`.execute(db);
    assert.deepEqual((await sql<{ id: string }>`select id from jobs`.execute(db)).rows.map((row) => row.id), ['dlv_1'], "a lane's jobs go with it");
  });
});
