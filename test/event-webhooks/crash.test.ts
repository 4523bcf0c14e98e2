import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, onPostgres, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

/**
 * kill -9 at any moment loses no delivery: the real service in a child
 * process, killed while attempts are in flight, restarted; on PostgreSQL a
 * second worker process shares the queue meanwhile.
 */
describe('crash safety of deliveries', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  let receiver: Receiver;
  let env: Record<string, string>;
  const processes: ServiceProcess[] = [];

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'crash-'));
    database = await freshDatabase(join(dir, 'service.db'));
    receiver = await startReceiver((_request, n) => ({ status: 200, delayMs: 50 + (n % 5) * 20 }));
    env = {
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: join(dir, 'mail'),
      RATE_LIMIT: 'off',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
      // A short timeout: a dead worker's attempts end soon on the receiver's side too.
      WEBHOOK_TIMEOUT_MS: '1000',
      WEBHOOK_RETRY_DELAYS: '100ms',
      MACHINE_BOOT_MS: '20',
      MACHINE_WORKER_INTERVAL_MS: '25',
    };
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGKILL');
    await db?.destroy();
    await receiver.close();
    await database.drop();
  });

  async function start(extra: Record<string, string> = {}): Promise<ServiceProcess> {
    const service = await startServiceProcess({ ...env, ...extra });
    processes.push(service);
    return service;
  }

  test('every event is delivered at least once, and never two attempts of one delivery at once', async () => {
    let api = await start();
    const worker = onPostgres ? await start({ ROLE: 'worker' }) : null;
    const json = { 'content-type': 'application/json', origin: api.url };
    const registered = await fetch(`${api.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'crash@example.com', password: 'correct horse battery', name: 'Crash' }) });
    assert.equal(registered.status, 201);
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${api.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'crash' }) })).json()).key as string;
    const bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const endpoint = await fetch(`${api.url}/api/event-webhooks`, { method: 'POST', headers: bearer, body: JSON.stringify({ url: receiver.url }) });
    assert.equal(endpoint.status, 201);

    // Events from the machine API: each machine boots (machine.created).
    const createMachines = async (service: ServiceProcess, count: number, prefix: string) => {
      for (let i = 0; i < count; i++) {
        const created = await fetch(`${service.url}/api/machines`, { method: 'POST', headers: bearer, body: JSON.stringify({ name: `${prefix}-${i}` }) });
        assert.equal(created.status, 201, await created.text());
      }
    };
    await createMachines(api, 40, 'before');
    await receiver.waitFor(5, 20_000);
    await eventually(() => receiver.unanswered() > 0 || undefined, 10_000, 'an attempt in flight');
    assert.ok(receiver.requests.length < 40, 'the kill lands while deliveries are still under way');
    assert.equal(await api.kill('SIGKILL'), null, 'killed, not exited');

    api = await start();
    await createMachines(api, 10, 'after');

    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    const expected = await eventually(async () => {
      const events = await db.selectFrom('events').select('id').execute();
      const delivered = new Set(receiver.requests.map((request) => JSON.parse(request.body).id as string));
      const missing = events.filter((event) => !delivered.has(event.id));
      return events.length >= 50 && missing.length === 0 ? events : undefined;
    }, 60_000, 'every stored event delivered');
    assert.ok(expected.length >= 50);
    assert.equal(receiver.maxConcurrentPerDelivery, 1, 'two attempts of one delivery overlapped');
    await eventually(async () => {
      const undelivered = await db.selectFrom('deliveries').select('id').where('status', '!=', 'delivered').execute();
      return undelivered.length === 0 || undefined;
    }, 30_000, 'every delivery recorded as delivered');
    if (worker) assert.equal(worker.child.exitCode, null, 'the second worker kept running');
    // Nothing of this test may work on into the next one.
    for (const service of processes.splice(0)) await service.kill('SIGKILL');
  });

  test('a retry scheduled before a kill -9 is made after the restart, at its time and not before', async () => {
    const RETRY_MS = 1500;
    const flaky = await startReceiver((_request, n) => ({ status: n === 1 ? 503 : 200 }));
    try {
      let service = await start({ WEBHOOK_RETRY_DELAYS: `${RETRY_MS}ms` });
      const json = { 'content-type': 'application/json', origin: service.url };
      const registered = await fetch(`${service.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'schedule@example.com', password: 'correct horse battery', name: 'S' }) });
      const session = { ...json, cookie: String(registered.headers.get('set-cookie')).split(';')[0]! };
      const created = await fetch(`${service.url}/api/event-webhooks`, { method: 'POST', headers: session, body: JSON.stringify({ url: flaky.url }) });
      assert.equal(created.status, 201);
      await fetch(`${service.url}/api/machines`, { method: 'POST', headers: session, body: JSON.stringify({ name: 'retry-after-restart' }) });
      const [failedAttempt] = await flaky.waitFor(1, 20_000);
      // Wait for the failure to be on record, then kill: the retry exists only in the database.
      db ??= connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
      const endpointId = (await created.json()).id as string;
      await eventually(async () => (await db.selectFrom('deliveries').select('attempts').where('endpoint_id', '=', endpointId).executeTakeFirst())?.attempts === 1 || undefined, 10_000, 'the failure recorded');
      assert.equal(await service.kill('SIGKILL'), null);
      service = await start({ WEBHOOK_RETRY_DELAYS: `${RETRY_MS}ms` });
      const [, retry] = await flaky.waitFor(2, 20_000);
      const gap = retry!.at - failedAttempt!.at;
      assert.ok(gap >= RETRY_MS - 50, `retried ${Math.round(gap)} ms after the failure, before its ${RETRY_MS} ms delay`);
      assert.equal(retry!.headers['service-delivery'], failedAttempt!.headers['service-delivery']);
      const row = await eventually(async () => {
        const found = await db.selectFrom('deliveries').select(['status', 'attempts']).where('endpoint_id', '=', endpointId).executeTakeFirst();
        return found?.status === 'delivered' ? found : undefined;
      }, 10_000, 'the retry recorded');
      assert.equal(row.attempts, 2);
      for (const running of processes.splice(0)) await running.kill('SIGKILL');
    } finally {
      await flaky.close();
    }
  });

  test('SIGTERM lets the attempts in flight finish and records them before exiting', async () => {
    // Slow enough to be caught in flight, well inside this service's timeout even on a loaded machine.
    const slow = await startReceiver(() => ({ status: 200, delayMs: 1500 }));
    try {
      const service = await start({ WEBHOOK_TIMEOUT_MS: '5000' });
      const json = { 'content-type': 'application/json', origin: service.url };
      const registered = await fetch(`${service.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'graceful@example.com', password: 'correct horse battery', name: 'G' }) });
      const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
      const session = { ...json, cookie };
      const created = await fetch(`${service.url}/api/event-webhooks`, { method: 'POST', headers: session, body: JSON.stringify({ url: slow.url }) });
      const endpointId = (await created.json()).id as string;
      for (let i = 0; i < 3; i++) await fetch(`${service.url}/api/machines`, { method: 'POST', headers: session, body: JSON.stringify({ name: `g-${i}` }) });
      await eventually(() => slow.unanswered() === 3 || undefined, 10_000, 'three attempts in flight');
      const code = await service.kill('SIGTERM');
      assert.equal(code, 0, `exit code ${code}; stderr: ${service.stderr()}`);
      assert.equal(slow.requests.length, 3, `requests: ${slow.requests.map((r) => r.headers['service-event']).join(', ')}`);
      db ??= connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
      const rows = await db.selectFrom('deliveries').select(['status', 'attempts']).where('endpoint_id', '=', endpointId).execute();
      assert.equal(rows.length, 3, JSON.stringify(rows));
      for (const row of rows) assert.deepEqual({ ...row }, { status: 'delivered', attempts: 1 }, JSON.stringify(rows));
      const jobs = await db.selectFrom('jobs').select(['id', 'locked_by']).where('lane', '=', endpointId).execute();
      assert.deepEqual(jobs, [], 'their jobs are settled, none left leased');
    } finally {
      await slow.close();
    }
  });
});
