import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { sendStatements } from '../../src/db/pg-statements.ts';
import { freshDatabase, onPostgres, type TestDatabase } from '../support/database.ts';

/**
 * PG_PREPARED_STATEMENTS sends the statements that repeat as named prepared
 * statements (src/db/pg-statements.ts). Whatever it saves, a transaction must
 * mean what it meant: all of its statements or none, at the isolation level it
 * asked for, and a statement whose preparation failed must run once it can.
 */
describe('PostgreSQL transactions with PG_PREPARED_STATEMENTS on', { skip: !onPostgres && 'Postgres only' }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  // The server's transaction id: the same within one transaction, a new one for each statement outside.
  const transactionId = async (on: Kysely<DB>) => (await sql<{ id: string }>`select txid_current()::text as id`.execute(on)).rows[0]!.id;
  const rowsOf = async () => (await sql<{ n: number }>`select n from pipelined order by n`.execute(db)).rows.map((row) => row.n);

  before(async () => {
    database = await freshDatabase();
    db = connectDatabase(database.url, { schema: database.schema, poolSize: 1, preparedStatements: true }).db;
    await sql`create table pipelined (n int primary key)`.execute(db);
  });
  after(async () => {
    await db.destroy();
    await database.drop();
  });

  test('the first statement runs inside the transaction: rolled back with it, and the same transaction as the next', async () => {
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await sql`insert into pipelined (n) values (${1})`.execute(trx);
        const [first, second] = [await transactionId(trx), await transactionId(trx)];
        assert.equal(first, second);
        throw new Error('roll back');
      }),
      /roll back/,
    );
    assert.deepEqual(await rowsOf(), []);
    assert.notEqual(await transactionId(db), await transactionId(db), 'outside a transaction again');
  });

  test('an error in the first statement fails the transaction, commits nothing, and leaves the connection usable', async () => {
    await sql`insert into pipelined (n) values (${10})`.execute(db);
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await sql`insert into pipelined (n) values (${10})`.execute(trx);
        await sql`insert into pipelined (n) values (${11})`.execute(trx);
      }),
      /duplicate key/,
    );
    assert.deepEqual(await rowsOf(), [10]);
    await db.transaction().execute(async (trx) => {
      await sql`insert into pipelined (n) values (${12})`.execute(trx);
    });
    assert.deepEqual(await rowsOf(), [10, 12]);
    await sql`delete from pipelined`.execute(db);
  });

  test('a transaction that runs no statement commits and rolls back', async () => {
    assert.equal(await db.transaction().execute(async () => 'nothing'), 'nothing');
    await assert.rejects(db.transaction().execute(async () => { throw new Error('nothing either'); }), /nothing either/);
    assert.notEqual(await transactionId(db), await transactionId(db), 'not left inside a transaction');
  });

  test('the isolation level asked for is the one the first statement runs at', async () => {
    const level = await db.transaction().setIsolationLevel('serializable').execute(async (trx) =>
      (await sql<{ transaction_isolation: string }>`show transaction_isolation`.execute(trx)).rows[0]!.transaction_isolation);
    assert.equal(level, 'serializable');
  });

  test('a prepared statement whose first parse fails, first in a transaction, is parsed again next time', async () => {
    // Seen once outside a transaction (unnamed), so named from its second run on, which fails to parse: its table is missing.
    const later = (trx: Kysely<DB>) => sql<{ n: number }>`select n from pipelined_later where n = ${1}`.execute(trx);
    await assert.rejects(later(db), /does not exist/);
    await assert.rejects(db.transaction().execute(later), /does not exist/);
    await sql`create table pipelined_later (n int)`.execute(db);
    await sql`insert into pipelined_later (n) values (${1})`.execute(db);
    const { rows } = await db.transaction().execute(later);
    assert.deepEqual(rows, [{ n: 1 }]);
  });

  // Regression: the statement was parsed, its run failed (a duplicate key here; a deadlock in the service), and the connection forgot it had it.
  test('a prepared statement whose first run in a transaction fails runs on that connection afterwards', async () => {
    const insert = (trx: Kysely<DB>, n: number) => sql`insert into pipelined_once (n) values (${n})`.execute(trx);
    await sql`create table pipelined_once (n int primary key)`.execute(db);
    await insert(db, 20);
    await assert.rejects(db.transaction().execute((trx) => insert(trx, 20)), /duplicate key/);
    await db.transaction().execute((trx) => insert(trx, 21));
    await insert(db, 22);
    assert.deepEqual((await sql<{ n: number }>`select n from pipelined_once order by n`.execute(db)).rows, [{ n: 20 }, { n: 21 }, { n: 22 }]);
  });

  test('a call outside Kysely’s usual form (a query config, as cursors and LISTEN use) runs in the transaction it follows', async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 1, options: `-c search_path=${database.schema}` });
    pool.on('connect', (client) => sendStatements(client));
    const client = await pool.connect();
    try {
      await client.query('begin', []);
      const viaConfig = (await client.query<{ id: string }>({ text: 'select txid_current()::text as id' })).rows[0]!.id;
      const viaText = (await client.query<{ id: string }>('select txid_current()::text as id', [])).rows[0]!.id;
      await client.query('commit', []);
      assert.equal(viaConfig, viaText, 'one transaction');
    } finally {
      client.release();
      await pool.end();
    }
  });
});
