import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import pg from 'pg';
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
