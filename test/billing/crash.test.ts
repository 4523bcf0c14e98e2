import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, onPostgres, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { eventually } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { assertChargedExactly, card } from './helpers.ts';

/** large: 36 USD/h, 10 µ$ a millisecond: every millisecond charged twice or lost shows. */
const LARGE_PRICE = 36_000_000;
const MACHINES = 20;

/**
 * kill -9 of the real service while it meters: no millisecond of running time
 * is charged twice or lost. The service runs as a child process (real time, a
 * metering pass every 100 ms), is killed three times, restarted each time; on
 * PostgreSQL a second process meters the same machines meanwhile.
 */
describe('metering across kill -9 (real processes)', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  let env: Record<string, string>;
  const processes: ServiceProcess[] = [];

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'billing-crash-'));
    database = await freshDatabase(join(dir, 'service.db'));
    env = {
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: join(dir, 'mail'),
      RATE_LIMIT: 'off',
      BILLING: 'on',
      METERING_INTERVAL: '100ms',
      MACHINE_PRICES: 'small=0.05,medium=0.10,large=36',
      MACHINE_BOOT_MS: '20',
      JOBS_POLL_INTERVAL_MS: '25',
    };
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGKILL');
    await db?.destroy();
    await database.drop();
  });

  async function start(extra: Record<string, string> = {}): Promise<ServiceProcess> {
    const service = await startServiceProcess({ ...env, ...extra });
    processes.push(service);
    return service;
  }

  test('every machine is charged exactly its running time', async () => {
    let api = await start();
    const worker = onPostgres ? await start({ ROLE: 'worker' }) : null;
    const json = { 'content-type': 'application/json', origin: api.url };
    const registered = await fetch(`${api.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'meter@example.com', password: 'correct horse battery', name: 'Meter' }) });
    assert.equal(registered.status, 201);
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${api.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'meter' }) })).json()).key as string;
    const bearer = (service: ServiceProcess) => ({ url: service.url, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } });
    const call = async (service: ServiceProcess, method: string, path: string, body?: unknown) => {
      const { url, headers } = bearer(service);
      return fetch(`${url}${path}`, body === undefined ? { method, headers: { authorization: headers.authorization } } : { method, headers, body: JSON.stringify(body) });
    };
    assert.equal((await call(api, 'PUT', '/api/billing/payment-method', card())).status, 200);
    assert.equal((await call(api, 'POST', '/api/billing/top-ups', { amount: '1000.00' })).status, 201);
    const ids: string[] = [];
    for (let i = 0; i < MACHINES; i++) {
      const created = await call(api, 'POST', '/api/machines', { name: `metered-${i}`, size: 'large' });
      const text = await created.text();
      assert.equal(created.status, 201, text);
      ids.push(JSON.parse(text).id);
    }
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    const running = () => db.selectFrom('machines').select('id').where('status', '=', 'running').execute();
    await eventually(async () => ((await running()).length === MACHINES ? true : undefined), 20_000, 'every machine running');
    const charges = () => db.selectFrom('billing_ledger').select('id').where('kind', '=', 'usage').execute();

    for (let kill = 0; kill < 3; kill++) {
      const before = (await charges()).length;
      await eventually(async () => ((await charges()).length >= before + MACHINES ? true : undefined), 30_000, 'a metering pass');
      await new Promise((resolve) => setTimeout(resolve, 37 + kill * 41));
      assert.equal(await api.kill('SIGKILL'), null, 'killed, not exited');
      api = await start();
    }
    // The killed process's pass is taken over once its lease runs out (at most 10 s), or the second process has it.
    const killedAt = Date.now();
    await eventually(async () => {
      const row = await db.selectFrom('billing_meters').select((eb) => eb.fn.min('metered_until').as('oldest')).executeTakeFirst();
      return Number(row?.oldest) > killedAt ? true : undefined;
    }, 30_000, 'metering resumed after the last kill');

    // Half the machines stop through the API, the other half by being destroyed.
    for (const [i, id] of ids.entries()) {
      const response = i % 2 ? await call(api, 'POST', `/api/machines/${id}/stop`) : await call(api, 'DELETE', `/api/machines/${id}`);
      assert.equal(response.status, 200, await response.text());
    }
    const machines = await db.selectFrom('machines').select(['id', 'booted_at', 'status']).execute();
    for (const machine of machines) {
      assert.ok(machine.status === 'stopped' || machine.status === 'destroyed', machine.status);
      const entries = await assertChargedExactly(db, machine.id, machine.booted_at!, null, LARGE_PRICE);
      assert.ok(entries >= 3, `charged again and again (${entries})`);
    }
    const meters = await db.selectFrom('billing_meters').selectAll().execute();
    assert.ok(meters.every((meter) => meter.metered_until === null), 'no meter left running');
    const ledger = await db.selectFrom('billing_ledger').selectAll().orderBy('id').execute();
    let balance = 0;
    for (const entry of ledger) {
      balance += entry.amount_micros;
      assert.equal(entry.balance_after_micros, balance);
    }
    const account = await db.selectFrom('billing_accounts').select('balance_micros').executeTakeFirstOrThrow();
    assert.equal(account.balance_micros, balance, 'the balance is the sum of the ledger');
    if (worker) assert.equal(worker.child.exitCode, null, 'the second process kept running');
    for (const service of processes.splice(0)) await service.kill('SIGKILL');
  });
});
