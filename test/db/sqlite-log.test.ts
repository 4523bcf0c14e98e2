import { strict as assert } from 'node:assert';
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { onPostgres } from '../support/database.ts';

const LOG_LIMIT = 64 * 1024 * 1024;
const ROW = 'x'.repeat(256 * 1024);

/**
 * SQLite's write-ahead log under writes that never pause: without a bound it
 * grows by every commit (a checkpoint running beside the writers never finds
 * it idle, so the log is never started again from its beginning). Group
 * commit, the one writer, holds the next batch while a checkpoint catches up.
 */
describe('SQLite write-ahead log', { skip: onPostgres && 'SQLite only' }, () => {
  test('stays within its limit while writers never pause, and loses nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sqlite-log-'));
    const path = join(dir, 'service.db');
    const database = connectDatabase(`sqlite:${path}`);
    const { db } = database;
    try {
      await sql`create table log_probe (id integer primary key, body text not null)`.execute(db);
      const writers = 4;
      const each = 100;
      let largest = 0;
      await Promise.all(
        Array.from({ length: writers }, async () => {
          for (let i = 0; i < each; i++) {
            await inTransaction(database, (tx) => sql`insert into log_probe (body) values (${ROW})`.execute(tx.db));
            largest = Math.max(largest, statSync(`${path}-wal`).size);
          }
        }),
      );
      // 400 × 256 KiB: 100 MiB written, more than the limit.
      const written = writers * each * ROW.length;
      assert.ok(written > LOG_LIMIT * 1.5);
      // A batch of the four writers (1 MiB) may be written past the limit before the next one waits.
      assert.ok(largest <= LOG_LIMIT + 4 * 1024 * 1024, `the log grew to ${(largest / 1024 / 1024).toFixed(1)} MiB`);
      const { rows } = await sql<{ n: number; bytes: number }>`select count(*) as n, sum(length(body)) as bytes from log_probe`.execute(db);
      assert.deepEqual({ ...rows[0] }, { n: writers * each, bytes: written });
    } finally {
      await database.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Regression (issue 38): only group commit waited for the log's room, so
 * writes outside it (a passkey challenge, a rate-limit counter, each its own
 * statement) went straight in, and under steady writes the log never started
 * again: 213 MB after a burst of sign-in options. Every statement that may
 * write now passes the same gate in the driver.
 */
describe('SQLite write-ahead log, writes outside group commit', { skip: onPostgres && 'SQLite only' }, () => {
  test('2,000 small writes, each its own statement, keep the log within a 1 MiB bound during and after the burst', async () => {
    const limit = 1024 * 1024;
    const slack = 64 * 1024;
    const dir = await mkdtemp(join(tmpdir(), 'sqlite-log-'));
    const path = join(dir, 'service.db');
    const database = connectDatabase(`sqlite:${path}`, { sqliteLogLimitBytes: limit });
    const { db } = database;
    const logSize = () => statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
    try {
      await sql`create table counter_probe (key text primary key, hits integer not null)`.execute(db);
      let largest = 0;
      for (let i = 0; i < 2000; i++) {
        // As a rate-limit counter is written: one upsert, no transaction of its own.
        await sql`insert into counter_probe (key, hits) values (${`key-${i}`}, 1) on conflict (key) do update set hits = hits + 1`.execute(db);
        largest = Math.max(largest, logSize());
      }
      assert.ok(largest <= limit + slack, `the log grew to ${(largest / 1024 / 1024).toFixed(2)} MiB during the burst`);
      // After it: a read, and a moment for the checkpoint thread, change nothing.
      await sql`select count(*) from counter_probe`.execute(db);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.ok(logSize() <= limit + slack, `the log is ${(logSize() / 1024 / 1024).toFixed(2)} MiB after the burst`);
      const { rows } = await sql<{ n: number }>`select count(*) as n from counter_probe`.execute(db);
      assert.equal(rows[0]!.n, 2000, 'every write is there');
    } finally {
      await database.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
