import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { connectDatabase, dialectOf } from '../../src/db/connect.ts';
import { insertRows, updateRows, type Columns } from '../../src/db/batch.ts';
import type { DB } from '../../src/db/database.ts';
import { recordAttempts } from '../../src/event-webhooks/deliveries.repository.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { freshDatabase, onPostgres, recordingStatements, type TestDatabase } from '../support/database.ts';

/**
 * The batched statements of the hot paths (src/db/batch.ts, and the attempt
 * record of deliveries.repository.ts): they change exactly the rows named,
 * and on PostgreSQL reach them through the primary key whatever the table's
 * size, never by reading the whole table.
 */

interface Wide {
  id: string;
  n: number;
  label: string | null;
}
const WIDE: Columns<Wide> = [
  ['id', 'text'],
  ['n', 'integer'],
  ['label', 'text'],
];
const KEY_AND_N: Columns<Pick<Wide, 'id' | 'n'>> = [
  ['id', 'text'],
  ['n', 'integer'],
];

/** The statements `run` sends, as sent (a copy of the database handle that records them). */
async function statementsOf(db: Kysely<DB>, run: (db: Kysely<DB>) => Promise<unknown>): Promise<CompiledQuery[]> {
  const sent: CompiledQuery[] = [];
  await run(recordingStatements(db, sent));
  return sent;
}

/**
 * The tables a statement's plan reads whole: its plan for these values, or
 * (`generic`) the plan PostgreSQL may keep for a prepared statement whatever
 * its values, which knows neither how many rows a batch has nor which.
 */
async function tablesScanned(db: Kysely<DB>, query: CompiledQuery, generic = false): Promise<string[]> {
  const { rows } = generic
    ? await db.connection().execute(async (connection) => {
        await sql.raw(`prepare probe as ${query.sql}`).execute(connection);
        await sql`set plan_cache_mode = force_generic_plan`.execute(connection);
        try {
          // A generic plan is the same whatever the values, and explain without analyze runs nothing: nulls do.
          const args = query.parameters.map(() => 'null').join(', ');
          return await connection.executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(`explain (format json) execute probe(${args})`));
        } finally {
          await sql`reset plan_cache_mode`.execute(connection);
          await sql`deallocate probe`.execute(connection);
        }
      })
    : await db.executeQuery<{ 'QUERY PLAN': unknown }>({ ...query, sql: `explain (format json) ${query.sql}` });
  const scanned: string[] = [];
  const walk = (node: Record<string, unknown>) => {
    if (node['Node Type'] === 'Seq Scan') scanned.push(node['Relation Name'] as string);
    for (const child of (node['Plans'] as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
  };
  const plan = rows[0]!['QUERY PLAN'];
  walk((typeof plan === 'string' ? JSON.parse(plan) : plan)[0].Plan);
  return scanned;
}

describe('batched statements', () => {
  let database: TestDatabase;
  let db: Kysely<DB>;

  before(async () => {
    database = await freshDatabase();
    db = connectDatabase(database.url, { schema: database.schema }).db;
    await migrateToLatest(db);
    await sql`create table wide (id text primary key, n integer not null, label text)`.execute(db);
    // Enough rows, with statistics, that reading the whole table looks cheap to a planner that does not know which rows a batch names.
    const values = Array.from({ length: 20_000 }, (_, i) => sql`(${`w${String(i).padStart(5, '0')}`}, ${i}, ${null})`);
    for (let i = 0; i < values.length; i += 1000) await sql`insert into wide (id, n, label) values ${sql.join(values.slice(i, i + 1000))}`.execute(db);
    if (dialectOf(db) === 'postgres') await sql`analyze wide`.execute(db);
  });
  after(async () => {
    await db.destroy();
    await database.drop();
  });

  test('updateRows sets each row its own values, only where the condition holds, and answers the keys it changed', async () => {
    const changed = await updateRows<Wide>(
      db,
      'wide' as keyof DB & string,
      WIDE,
      [
        { id: 'w00001', n: -1, label: 'one' },
        { id: 'w00002', n: -2, label: null },
        { id: 'absent', n: -3, label: 'none' },
      ],
      { returning: true },
    );
    assert.deepEqual(changed.sort(), ['w00001', 'w00002']);
    const rowsOf = async (ids: string[]) => (await sql<Wide>`select id, n, label from wide where id in (${sql.join(ids)}) order by id`.execute(db)).rows.map((row) => ({ ...row }));
    assert.deepEqual(await rowsOf(['w00000', 'w00001', 'w00002']), [
      { id: 'w00000', n: 0, label: null },
      { id: 'w00001', n: -1, label: 'one' },
      { id: 'w00002', n: -2, label: null },
    ]);
    const none = await updateRows<Pick<Wide, 'id' | 'n'>>(db, 'wide' as keyof DB & string, KEY_AND_N, [{ id: 'w00003', n: -4 }], { also: "label = 'also'", where: { label: 'no such label' }, returning: true });
    assert.deepEqual(none, []);
    const some = await updateRows<Pick<Wide, 'id' | 'n'>>(db, 'wide' as keyof DB & string, KEY_AND_N, [{ id: 'w00001', n: 1 }], { also: "label = 'also'", where: { label: 'one' }, returning: true });
    assert.deepEqual(some, ['w00001']);
    assert.deepEqual(await rowsOf(['w00001', 'w00003']), [
      { id: 'w00001', n: 1, label: 'also' },
      { id: 'w00003', n: 3, label: null },
    ]);
  });

  test('on PostgreSQL, a batch update walks the primary key instead of reading the whole table', { skip: !onPostgres && 'Postgres only' }, async () => {
    const batch = Array.from({ length: 150 }, (_, i) => ({ id: `w${String(i * 97).padStart(5, '0')}`, n: i, label: 'batched' }));
    const [update] = await statementsOf(db, (recording) => updateRows<Wide>(recording, 'wide' as keyof DB & string, WIDE, batch));
    assert.deepEqual(await tablesScanned(db, update!), []);
    assert.deepEqual(await tablesScanned(db, update!, true), [], 'the generic plan too');
  });

  test('a batch keeps every value exactly as given, whatever its characters, on insert and on update', async () => {
    interface Odd {
      id: string;
      big: number | null;
      label: string | null;
    }
    const ODD: Columns<Odd> = [
      ['id', 'text'],
      ['big', 'bigint'],
      ['label', 'text'],
    ];
    await sql`create table odd (id text primary key, big bigint, label text)`.execute(db);
    // What an array literal would have to escape (PostgreSQL takes a batch's columns as arrays), and what it must not turn into NULL.
    const labels = ['quote " inside', 'back\\slash \\', '{braces}, commas', 'NULL', '', null, 'ünïcødé ✓ 🚀', 'line\nbreak\ttab', ' spaces ', 'x'.repeat(5000)];
    const rows: Odd[] = labels.map((label, i) => ({ id: `o${i}`, big: i === 0 ? null : 1_800_000_000_000 + i * (i % 2 ? 1 : -1), label }));
    await insertRows<Odd>(db, 'odd' as keyof DB & string, ODD, rows);
    const read = async () => (await sql<Odd>`select id, big, label from odd order by id`.execute(db)).rows.map((row) => ({ id: row.id, big: row.big === null ? null : Number(row.big), label: row.label }));
    assert.deepEqual(await read(), [...rows].sort((a, b) => (a.id < b.id ? -1 : 1)));
    // Half a character (a string cut between the two halves of a surrogate pair) is stored as U+FFFD, as a single value would be.
    await insertRows<Odd>(db, 'odd' as keyof DB & string, ODD, [{ id: 'p0', big: 1, label: 'cut \ud83d' }, { id: 'p1', big: 2, label: '\ude80 and back\\ud83d' }]);
    const halves = (await sql<Odd>`select label from odd where id in ('p0', 'p1') order by id`.execute(db)).rows.map((row) => row.label);
    assert.deepEqual(halves, ['cut \ufffd', '\ufffd and back\\ud83d']);
    await sql`delete from odd where id in ('p0', 'p1')`.execute(db);
    const reversed = rows.map((row, i) => ({ ...row, label: labels[labels.length - 1 - i]!, big: row.big === null ? 0 : -row.big }));
    await updateRows<Odd>(db, 'odd' as keyof DB & string, ODD, reversed);
    assert.deepEqual(await read(), [...reversed].sort((a, b) => (a.id < b.id ? -1 : 1)));
  });

  test('on PostgreSQL, a batched statement has one text whatever its number of rows (each connection plans it once)', { skip: !onPostgres && 'Postgres only' }, async () => {
    const textsFor = async (sizes: number[]) =>
      new Set(
        (
          await statementsOf(db, async (recording) => {
            for (const size of sizes) await updateRows<Wide>(recording, 'wide' as keyof DB & string, WIDE, Array.from({ length: size }, (_, i) => ({ id: `w${String(i).padStart(5, '0')}`, n: i, label: null })));
          })
        ).map((query) => query.sql),
      );
    assert.equal((await textsFor([1, 2, 150])).size, 1);
  });

  /** 20,000 pending deliveries of one endpoint, `dlv_00000`…`dlv_19999`, with statistics. */
  async function seedDeliveries(): Promise<void> {
    const now = Date.now();
    await sql`insert into accounts (id, email, name, password_hash, email_verified_at, created_at, updated_at) values ('acct_1', 'a@example.com', 'a', 'x', null, ${now}, ${now})`.execute(db);
    await sql`insert into event_endpoints (id, account_id, url, description, events, secret, enabled, created_at, updated_at) values ('ep_1', 'acct_1', 'https://example.com/hook', '', '["*"]', 'whsec_x', 1, ${now}, ${now})`.execute(db);
    await sql`insert into events (id, account_id, type, payload, created_at) select 'evt_' || lpad(i::text, 5, '0'), 'acct_1', 'machine.created', '{}', ${now} from generate_series(0, 19999) as i`.execute(db);
    await sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) select 'dlv_' || lpad(i::text, 5, '0'), 'acct_1', 'ep_1', 'evt_' || lpad(i::text, 5, '0'), 'machine.created', 'pending', 0, ${now}, ${now} from generate_series(0, 19999) as i`.execute(db);
    await sql`analyze deliveries`.execute(db);
  }

  const attemptsOf = (ids: string[], now: number) =>
    ids.map((id, i) => ({
      id,
      endpointId: 'ep_1',
      ok: i % 2 === 0,
      status: i % 2 === 0 ? ('delivered' as const) : ('pending' as const),
      nextAttemptAt: i % 2 === 0 ? null : now + 60_000,
      responseStatus: i % 2 === 0 ? 200 : 500,
      body: 'ok',
      error: i % 2 === 0 ? null : 'status 500',
      durationMs: 3,
      at: now,
    }));

  test('on PostgreSQL, recording a batch of attempts is one statement that reads no table whole', { skip: !onPostgres && 'Postgres only' }, async () => {
    await seedDeliveries();
    const now = Date.now();
    const attempts = attemptsOf(Array.from({ length: 150 }, (_, i) => `dlv_${String(i * 97).padStart(5, '0')}`), now);
    const statements = await statementsOf(db, (recording) => recordAttempts(recording, attempts));
    assert.equal(statements.length, 1);
    assert.deepEqual(await tablesScanned(db, statements[0]!), []);
    assert.deepEqual(await tablesScanned(db, statements[0]!, true), [], 'the generic plan too');
    const logged = (await sql<{ n: number; count: string }>`select n, count(*)::text as count from delivery_attempts group by n`.execute(db)).rows.map((row) => ({ ...row }));
    assert.deepEqual(logged, [{ n: 1, count: '150' }], 'every attempt logged once, numbered 1');
    const retrying = (await sql<{ status: string; attempts: number; last_error: string }>`select status, attempts, last_error from deliveries where id = 'dlv_00097'`.execute(db)).rows[0];
    assert.deepEqual({ ...retrying }, { status: 'pending', attempts: 1, last_error: 'status 500' });
  });

  test('on PostgreSQL, batches of attempts of any size are one statement text', { skip: !onPostgres && 'Postgres only' }, async () => {
    const now = Date.now();
    const texts = new Set<string>();
    for (const size of [1, 3, 40]) {
      const ids = Array.from({ length: size }, (_, i) => `dlv_${String(10_000 + size * 100 + i).padStart(5, '0')}`);
      for (const query of await statementsOf(db, (recording) => recordAttempts(recording, attemptsOf(ids, now)))) texts.add(query.sql);
    }
    assert.equal(texts.size, 1);
  });

  test('on PostgreSQL, an attempt updates its delivery in place: no index changes (a HOT update)', { skip: !onPostgres && 'Postgres only' }, async () => {
    // Deliveries the test above did not touch, each attempted twice: a retry, then an outcome.
    const ids = Array.from({ length: 40 }, (_, i) => `dlv_${String(i * 97 + 1).padStart(5, '0')}`);
    const updates = await db.transaction().execute(async (trx) => {
      // This connection's counts not yet reported (earlier transactions' too): the difference is this one's.
      const counts = async () =>
        (await sql<{ updated: number; hot: number }>`select n_tup_upd::int as updated, n_tup_hot_upd::int as hot from pg_stat_xact_user_tables where relid = 'deliveries'::regclass`.execute(trx)).rows[0]!;
      const before = await counts();
      await recordAttempts(trx, attemptsOf(ids, Date.now()));
      await recordAttempts(trx, attemptsOf(ids, Date.now()));
      const after = await counts();
      return { updated: after.updated - before.updated, hot: after.hot - before.hot };
    });
    assert.deepEqual(updates, { updated: 80, hot: 80 });
  });
});
