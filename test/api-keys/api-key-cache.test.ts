import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { asBearer, asSession, createApiKey, createTestApp, registerUser, settled, type TestContext } from '../support/app.ts';
import { freshDatabase, onPostgres, type TestDatabase } from '../support/database.ts';
import { linkIn, startSmtpServer, type SmtpInbox } from '../support/mail.ts';
import { eventually } from '../support/receiver.ts';

/**
 * Two processes in one thread: a request to the other process after a change here arrives, as it would over a
 * socket, in a later turn of the event loop (each process reads SQLite's data_version once per turn).
 */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Authenticated keys are cached in memory; revocation and account changes must still show at once. */
describe('API keys held in memory stay truthful', () => {
  let database: TestDatabase;
  let smtp: SmtpInbox;
  let first: TestContext;
  let second: TestContext;

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'key-cache-')), 'shared.db'));
    smtp = await startSmtpServer();
    first = await createTestApp({ database, smtp, realClock: true });
    second = await createTestApp({ database, smtp, realClock: true });
  });
  after(async () => {
    await first.close();
    await second.close();
    await smtp.close();
    await database.drop();
  });

  const me = (ctx: TestContext, key: string) => ctx.app.inject({ method: 'GET', url: '/api/me', headers: asBearer(key) });

  test('a key revoked through one process is refused by another that had it in memory', async () => {
    const user = await registerUser(first);
    const key = await createApiKey(first, user);
    assert.equal((await me(second, key)).statusCode, 200, 'the second process now holds the key');
    const revoked = await first.app.inject({ method: 'DELETE', url: `/api/keys/${(await first.app.inject({ method: 'GET', url: '/api/keys', headers: asSession(user.session) })).json().data[0].id}`, headers: asSession(user.session) });
    assert.equal(revoked.statusCode, 204);
    assert.equal((await me(first, key)).statusCode, 401, 'at once where it was revoked');
    if (onPostgres) {
      // PostgreSQL delivers the revocation by NOTIFY, a moment after the commit.
      const started = Date.now();
      await eventually(async () => ((await me(second, key)).statusCode === 401 ? true : undefined), 2000, 'the other process refusing the key');
      assert.ok(Date.now() - started < 1000, 'heard through NOTIFY, not by expiry');
    } else {
      // Regression: on one SQLite file the other process trusted its memory of the key for up to 2 s after the revocation.
      await nextTurn();
      assert.equal((await me(second, key)).statusCode, 401, 'at once in the other process too');
    }
  });

  test('GET /api/me with a key shows the address as confirmed right after the confirmation', async () => {
    const user = await registerUser(first);
    const key = await createApiKey(first, user);
    assert.equal((await me(first, key)).json().account.emailVerified, false);
    assert.equal((await me(second, key)).json().account.emailVerified, false, 'the second process now holds the key');
    await settled(first);
    const { token } = linkIn(smtp.to(user.email).at(-1)!, '/verify-email');
    assert.equal((await first.app.inject({ method: 'POST', url: '/api/auth/verify', payload: { token } })).statusCode, 200);
    assert.equal((await me(first, key)).json().account.emailVerified, true);
    if (onPostgres) await eventually(async () => ((await me(second, key)).json().account.emailVerified === true ? true : undefined), 3000, 'the other process');
    else {
      await nextTurn();
      assert.equal((await me(second, key)).json().account.emailVerified, true, 'at once in the other process on one SQLite file');
    }
  });
});
