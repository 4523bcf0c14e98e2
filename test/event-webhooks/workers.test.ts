import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
import { startSmtpServer, type SmtpInbox } from '../support/mail.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, emit } from './helpers.ts';

describe('several workers on one database', () => {
  let database: TestDatabase;
  let smtp: SmtpInbox;
  let first: TestContext;
  let second: TestContext;
  const receivers: Receiver[] = [];

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'workers-')), 'shared.db'));
    smtp = await startSmtpServer();
    const env = { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_DELAYS: '20ms', WEBHOOK_MAX_ATTEMPTS: '10' };
    first = await createTestApp({ database, smtp, realClock: true, env, buildOptions: { workerOptions: { pollIntervalMs: 50 } } });
    second = await createTestApp({ database, smtp, realClock: true, env, buildOptions: { workerOptions: { pollIntervalMs: 50 } } });
  });
  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await first.close();
    await second.close();
    await smtp.close();
    await database.drop();
  });

  test('every event is delivered, and no delivery is ever attempted twice at the same time', async () => {
    const user = await registerUser(first);
    // Slow, flaky receivers: attempts overlap in time, retries come fast, and both workers poll the same rows.
    for (let i = 0; i < 3; i++) {
      receivers.push(await startReceiver((_request, n) => ({ status: n % 3 === 0 ? 500 : 200, delayMs: 5 + (n % 7) })));
    }
    for (const receiver of receivers) await createEndpoint(first, user, { url: receiver.url });
    const emitted: string[] = [];
    for (let i = 0; i < 60; i++) {
      const event = await emit(i % 2 === 0 ? first : second, user.id, 'machine.created');
      emitted.push(event.id);
    }
    for (const receiver of receivers) {
      await eventually(() => {
        const delivered = new Set(receiver.requests.map((r) => JSON.parse(r.body).id));
        return emitted.every((id) => delivered.has(id)) || undefined;
      }, 20_000, 'every event at every receiver');
      assert.equal(receiver.maxConcurrentPerDelivery, 1, 'two attempts of one delivery overlapped');
    }
    const rows = await eventually(async () => {
      const pending = await first.app.deps.db.selectFrom('deliveries').select('status').where('status', '!=', 'delivered').execute();
      return pending.length === 0 ? true : undefined;
    }, 20_000, 'all deliveries recorded as delivered');
    assert.ok(rows);
  });
});
