import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { connectDatabase, type Database } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { freshDatabase, onPostgres, type TestDatabase } from '../support/database.ts';

/** inTransaction on a real database; on SQLite, concurrent callers share commits (group commit). */
describe('inTransaction', () => {
  let fresh: TestDatabase;
  let database: Database;
  let db: Kysely<DB>;
  const rows = async () => (await sql<{ id: string }>`select id from tx_probe order by id`.execute(db)).rows.map((row) => row.id);
  const insert = (tx: { db: Kysely<DB> }, id: string, parent: string | null = null) => sql`insert into tx_probe (id, parent) values (${id}, ${parent})`.execute(tx.db);

  before(async () => {
    fresh = await freshDatabase();
    database = connectDatabase(fresh.url, fresh.schema ? { schema: fresh.schema } : {});
    db = database.db;
    // A deferred foreign key is checked at COMMIT: the way to make a commit itself fail.
    await sql`create table tx_probe (id text primary key, parent text references tx_probe (id) deferrable initially deferred)`.execute(db);
  });
  after(async () => {
    await database.destroy();
    await fresh.drop();
  });

  test('concurrent transactions commit or roll back each on its own; after-commit work runs only for those committed, before they return', async () => {
    await sql`delete from tx_probe`.execute(db);
    const afterCommit: string[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        inTransaction(database, async (tx) => {
          const id = `row-${String(i).padStart(2, '0')}`;
          await insert(tx, id);
          tx.afterCommit(() => afterCommit.push(id));
          if (i % 4 === 1) throw new Error(`caller ${i} changed its mind`);
          return id;
        }).then((id) => {
          assert.ok(afterCommit.includes(id), 'after-commit work ran before the caller got its answer');
          return id;
        }),
      ),
    );
    const kept = ['row-00', 'row-02', 'row-03', 'row-04', 'row-06', 'row-07', 'row-08', 'row-10', 'row-11'];
    assert.deepEqual(results.filter((r) => r.status === 'fulfilled').map((r) => r.value), kept);
    assert.deepEqual(
      results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : [])),
      ['caller 1 changed its mind', 'caller 5 changed its mind', 'caller 9 changed its mind'],
    );
    assert.deepEqual(await rows(), kept);
    assert.deepEqual(afterCommit.sort(), kept);
  });

  test('a statement error rolls back that transaction only, and the error reaches its caller', async () => {
    await sql`delete from tx_probe`.execute(db);
    await inTransaction(database, async (tx) => insert(tx, 'a'));
    const results = await Promise.allSettled([
      inTransaction(database, async (tx) => insert(tx, 'x')),
      inTransaction(database, async (tx) => {
        await insert(tx, 'b');
        await insert(tx, 'a'); // duplicate key
      }),
      inTransaction(database, async (tx) => insert(tx, 'c')),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual(await rows(), ['a', 'c', 'x']);
  });

  test('a commit that fails keeps nothing of the transactions in it, tells each caller, and the next transaction works', async () => {
    await sql`delete from tx_probe`.execute(db);
    const afterCommit: string[] = [];
    const results = await Promise.allSettled([
      inTransaction(database, async (tx) => {
        await insert(tx, 'orphan', 'missing-parent');
        tx.afterCommit(() => afterCommit.push('orphan'));
      }),
      inTransaction(database, async (tx) => {
        await insert(tx, 'neighbour');
        tx.afterCommit(() => afterCommit.push('neighbour'));
      }),
    ]);
    assert.equal(results[0]!.status, 'rejected', 'the orphan fails at commit');
    // On SQLite both shared that commit; on PostgreSQL each had its own.
    assert.equal(results[1]!.status, onPostgres ? 'fulfilled' : 'rejected');
    assert.deepEqual(await rows(), onPostgres ? ['neighbour'] : []);
    assert.deepEqual(afterCommit, onPostgres ? ['neighbour'] : []);
    await inTransaction(database, async (tx) => insert(tx, 'after'));
    assert.ok((await rows()).includes('after'));
  });

  test('writers that queue up back to back leave the event loop its turns: I/O waiting meanwhile is not held off until they stop', async () => {
    await sql`delete from tx_probe`.execute(db);
    const writers = 4;
    const each = 250;
    let committed = 0;
    let committedWhenTheLoopTurned: number | undefined;
    // Due at the loop's next turn: the first I/O after the writers start (a webhook's answer, a request).
    const turned = new Promise<void>((resolve) =>
      setImmediate(() => {
        committedWhenTheLoopTurned = committed;
        resolve();
      }),
    );
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        for (let i = 0; i < each; i++) {
          await inTransaction(database, (tx) => insert(tx, `w${w}-${String(i).padStart(3, '0')}`));
          committed += 1;
        }
      }),
    );
    await turned;
    assert.equal(committed, writers * each);
    assert.ok(committedWhenTheLoopTurned! < writers * 3, `the loop turned after ${committedWhenTheLoopTurned} of ${writers * each} transactions`);
  });
});
