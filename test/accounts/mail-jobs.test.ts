import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_LEASE_MS } from '../../src/jobs/job-kind.ts';
import { connectDatabase } from '../../src/db/connect.ts';
import { generateOpaqueToken, hashToken } from '../../src/shared/secrets.ts';
import { asSession, createTestApp, registerUser, settled, type TestContext } from '../support/app.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { startSmtpServer, type SmtpInbox } from '../support/mail.ts';
import { eventually } from '../support/receiver.ts';
import { freePort, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

describe('mail is a job: a failing SMTP server is retried, not a mail lost', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  test('the security notice is tried again 5 s, 10 s and 20 s after each failure, and sent once the server takes it', async () => {
    const user = await registerUser(ctx);
    await settled(ctx);
    const notices = () => ctx.smtp.to(user.email).filter((mail) => mail.subject === 'Your password was changed');
    ctx.smtp.failing = true;
    try {
      const changed = await ctx.app.inject({
        method: 'POST',
        url: '/api/me/password',
        headers: asSession(user.session),
        payload: { currentPassword: user.password, newPassword: 'another long password' },
      });
      assert.equal(changed.statusCode, 200, 'the change does not wait for, or depend on, the mail');
      await settled(ctx);
      const job = () => ctx.app.deps.db.selectFrom('jobs').selectAll().where('kind', '=', 'mail.password-notice').executeTakeFirst();
      const first = await job();
      assert.equal(first?.attempts, 1);
      assert.equal(first?.run_at, ctx.clock.now() + 5000);
      assert.match(String(first?.last_error), /mailbox unavailable/);
      ctx.clock.advance(5000);
      await settled(ctx);
      assert.deepEqual([(await job())?.attempts, (await job())?.run_at], [2, ctx.clock.now() + 10_000], 'the delay doubles');
      ctx.clock.advance(10_000);
      await settled(ctx);
      assert.deepEqual([(await job())?.attempts, (await job())?.run_at], [3, ctx.clock.now() + 20_000]);
      assert.equal(notices().length, 0);
    } finally {
      ctx.smtp.failing = false;
    }
    ctx.clock.advance(19_999);
    await settled(ctx);
    assert.equal(notices().length, 0, 'not before its time');
    ctx.clock.advance(1);
    await settled(ctx);
    assert.equal(notices().length, 1, 'sent once the server is back, and only once');
    assert.deepEqual(await ctx.app.deps.db.selectFrom('jobs').select('id').where('kind', '=', 'mail.password-notice').execute(), []);
  });
});

/**
 * The real service in a child process, killed with SIGKILL right after a
 * password reset commits: the security notice was enqueued in the reset's own
 * transaction, so the restarted service sends it.
 */
describe('a mail survives a crash right after its change commits', { timeout: DEFAULT_LEASE_MS + 90_000 }, () => {
  let database: TestDatabase;
  let smtp: SmtpInbox;
  let service: ServiceProcess | undefined;

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'mail-crash-')), 'service.db'));
    smtp = await startSmtpServer();
  });
  after(async () => {
    await service?.kill('SIGKILL');
    await smtp.close();
    await database.drop();
  });

  test('SIGKILL right after a reset: the security notice is sent after the restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mail-crash-'));
    // First with a mail server that refuses connections: nothing can be sent before the kill.
    const closedPort = await freePort();
    const env = { DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail'), RATE_LIMIT: 'off' };
    service = await startServiceProcess({ ...env, SMTP_URL: `smtp://127.0.0.1:${closedPort}` });
    const json = { 'content-type': 'application/json', origin: service.url };
    const registered = await fetch(`${service.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'crash-reset@example.com', password: 'correct horse battery', name: 'C' }) });
    assert.equal(registered.status, 201);
    const accountId = (await registered.json()).account.id as string;
    // A reset link, as the (unsendable) reset mail would have carried it.
    const token = generateOpaqueToken();
    const db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    try {
      const now = Date.now();
      await db.insertInto('email_tokens').values({ token_hash: hashToken(token), account_id: accountId, purpose: 'reset_password', expires_at: now + 3_600_000, used_at: null, created_at: now }).execute();
    } finally {
      await db.destroy();
    }

    const reset = await fetch(`${service.url}/api/auth/reset`, { method: 'POST', headers: json, body: JSON.stringify({ token, password: 'a brand new password' }) });
    assert.equal(reset.status, 200, 'the reset committed');
    assert.equal(await service.kill('SIGKILL'), null, 'killed, not exited');
    assert.equal(smtp.to('crash-reset@example.com').length, 0);

    service = await startServiceProcess({ ...env, SMTP_URL: smtp.url });
    // Killed before its first attempt was settled, the notice's job is still leased to the dead process: the
    // restarted one takes it over when that lease runs out (DEFAULT_LEASE_MS), as it would any job.
    const notice = await eventually(
      () => smtp.to('crash-reset@example.com').find((mail) => mail.subject === 'Your password was changed'),
      DEFAULT_LEASE_MS + 30_000,
      'the security notice after the restart',
    );
    assert.match(notice.text, /was reset at/);
    const signedIn = await fetch(`${service.url}/api/auth/login`, { method: 'POST', headers: { ...json, origin: service.url }, body: JSON.stringify({ email: 'crash-reset@example.com', password: 'a brand new password' }) });
    assert.equal(signedIn.status, 200, 'and the reset itself survived');
  });
});
