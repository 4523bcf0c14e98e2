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
