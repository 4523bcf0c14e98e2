import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import { asSession, createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
import { startSmtpServer, type SmtpInbox } from '../support/mail.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, emit } from './helpers.ts';

/** ROLE=api and ROLE=worker as two processes on one database (a SQLite file, or PostgreSQL). */
describe('an API process and a worker process', () => {
  let database: TestDatabase;
  let smtp: SmtpInbox;
  let api: TestContext;
  let worker: TestContext;
  let hook: Receiver;

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'processes-')), 'shared.db'));
    smtp = await startSmtpServer();
    api = await createTestApp({ database, smtp, realClock: true, env: { ROLE: 'api' } });
    worker = await createTestApp({ database, smtp, realClock: true, env: { ROLE: 'worker', WEBHOOK_TIMEOUT_MS: '600' }, buildOptions: { runnerOptions: { pollIntervalMs: 50 } } });
    // The first sixteen attempts get no answer: the lane stays full until they time out (600 ms: long enough for the
    // rotation to commit, short of the 1 s for which the worker would otherwise reuse its copy of the endpoint).
    hook = await startReceiver((_request, n) => (n <= 16 ? 'hang' : { status: 200 }));
  });
  after(async () => {
    await hook.close();
    await api.close();
    await worker.close();
    await smtp.close();
    await database.drop();
  });

  // Regression: on one SQLite file nothing told the worker, which signed with its copy of the endpoint for up to a second.
  test('a secret rotated through the API process signs every attempt the worker starts afterwards', async () => {
    const user = await registerUser(api);
    const endpoint = await createEndpoint(api, user, { url: hook.url });
    for (let i = 0; i < 20; i++) await emit(api, user.id, 'machine.created');
    // Sixteen attempts in flight (the lane's width) until they time out, four queued behind them with the worker's copy of the endpoint.
    await hook.waitFor(16);
    const rotated = await api.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/rotate-secret`, headers: asSession(user.session) });
    const { secret } = rotated.json();
    const requests = await hook.waitFor(20);
    const signedWith = (request: (typeof requests)[number], key: string) => {
      try {
        return Boolean(verifyWebhook(request.body, String(request.headers['service-signature']), key));
      } catch {
        return false;
      }
    };
    assert.ok(requests.slice(0, 16).every((request) => signedWith(request, endpoint.secret)));
    assert.deepEqual(requests.slice(16).map((request) => signedWith(request, secret)), [true, true, true, true], 'the queued four, sent after the rotation');
  });
});
