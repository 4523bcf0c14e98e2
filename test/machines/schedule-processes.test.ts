import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { eventually } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

/**
 * Two real service processes, each running the machine worker every 25 ms, on one database:
 * a schedule's tick fires exactly once (PostgreSQL in CI's second pass; one SQLite file in the first).
 */
describe('a schedule fires once per tick with two service processes', { timeout: 150_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  const processes: ServiceProcess[] = [];

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'schedule-processes-'));
    database = await freshDatabase(join(dir, 'service.db'));
    const env = { DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail'), RATE_LIMIT: 'off', MACHINE_BOOT_MS: '20', MACHINE_WORKER_INTERVAL_MS: '25' };
    processes.push(await startServiceProcess(env), await startServiceProcess(env));
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {});
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGKILL');
    await db?.destroy();
    await database.drop();
  });

  test('one run, one run.succeeded event, whichever process gets there first', async () => {
    const [first, second] = processes as [ServiceProcess, ServiceProcess];
    const json = { 'content-type': 'application/json', origin: first.url };
    const registered = await fetch(`${first.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'cron@example.com', password: 'correct horse battery', name: 'Cron' }) });
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${first.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'k' }) })).json()).key as string;
    const bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const machine = await (await fetch(`${second.url}/api/machines`, { method: 'POST', headers: bearer, body: JSON.stringify({ name: 'cron-box' }) })).json();
    await eventually(async () => ((await (await fetch(`${second.url}/api/machines/${machine.id}`, { headers: bearer })).json()).status === 'running' ? true : undefined), 10_000, 'the machine running');

    const created = await fetch(`${first.url}/api/schedules`, { method: 'POST', headers: bearer, body: JSON.stringify({ machineId: machine.id, name: 'every-minute', cron: '* * * * *', command: 'tick' }) });
    assert.equal(created.status, 201);
    const schedule = await created.json();
    const tickAt = Date.parse(schedule.nextRunAt);
    await eventually(async () => ((await (await fetch(`${first.url}/api/schedules/${schedule.id}`, { headers: bearer })).json()).lastRunAt !== null ? true : undefined), tickAt - Date.now() + 15_000, 'the tick');
    // Both processes keep polling for a while after the tick: still exactly one run.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const runs = await db.selectFrom('runs').select(['id', 'status']).where('source_id', '=', schedule.id).execute();
    assert.equal(runs.length, 1, JSON.stringify(runs));
    const events = await db.selectFrom('events').select('payload').where('type', '=', 'run.succeeded').execute();
    assert.equal(events.filter((row) => row.payload.includes(schedule.id)).length, 1);
  });
});
