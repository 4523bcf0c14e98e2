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

/** Schedules due at the same instant: more than one claim of one process takes. */
const SCHEDULES = 150;

/**
 * Two real service processes, each looking for due jobs every 25 ms, on one database:
 * a schedule's tick fires exactly once (PostgreSQL in CI's second pass; one SQLite file in the first).
 */
describe('a schedule fires once per tick with two service processes', { timeout: 150_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  const processes: ServiceProcess[] = [];

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'schedule-processes-'));
    database = await freshDatabase(join(dir, 'service.db'));
    const env = { DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail'), RATE_LIMIT: 'off', MACHINE_BOOT_MS: '20', JOBS_POLL_INTERVAL_MS: '25' };
    // One at a time into the list: if the second fails to start, after() must still stop the first (else it keeps the test process alive).
    processes.push(await startServiceProcess(env));
    processes.push(await startServiceProcess(env));
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGKILL');
    await db?.destroy();
    await database.drop();
  });

  test('one run and one run.succeeded per schedule and tick, whichever process gets there first, with their passes overlapping', async () => {
    const [first, second] = processes as [ServiceProcess, ServiceProcess];
    const json = { 'content-type': 'application/json', origin: first.url };
    const registered = await fetch(`${first.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'cron@example.com', password: 'correct horse battery', name: 'Cron' }) });
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${first.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'k' }) })).json()).key as string;
    const bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const machine = await (await fetch(`${second.url}/api/machines`, { method: 'POST', headers: bearer, body: JSON.stringify({ name: 'cron-box' }) })).json();
    await eventually(async () => ((await (await fetch(`${second.url}/api/machines/${machine.id}`, { headers: bearer })).json()).status === 'running' ? true : undefined), 10_000, 'the machine running');

    // Enough schedules on one tick that each process's pass takes a while and the two overlap: a claim
    // that did not compare next_run_at would let both fire most of them (regression: with one schedule,
    // the two 25 ms loops rarely met, and the test passed without the guard).
    const ids: string[] = [];
    for (let batch = 0; batch < SCHEDULES / 10; batch++) {
      const created = await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const via = i % 2 === 0 ? first : second;
          // A cron far from now, so that nothing fires while they are created.
          const response = await fetch(`${via.url}/api/schedules`, { method: 'POST', headers: bearer, body: JSON.stringify({ machineId: machine.id, name: `s-${batch}-${i}`, cron: '0 0 1 1 *', command: 'tick' }) });
          assert.equal(response.status, 201);
          return (await response.json()).id as string;
        }),
      );
      ids.push(...created);
    }
    // Then all of them due at the same instant, a moment from now (written directly, schedule and tick job: a shared cron minute would mean waiting up to a minute).
    const tickAt = Date.now() + 1500;
    await db.updateTable('schedules').set({ next_run_at: tickAt }).where('id', 'in', ids).execute();
    await db.updateTable('jobs').set({ run_at: tickAt }).where('key', 'in', ids.map((id) => `schedule.tick:${id}`)).execute();

    await eventually(async () => {
      const fired = await db.selectFrom('schedules').select('id').where('id', 'in', ids).where('last_run_at', 'is not', null).execute();
      return fired.length === SCHEDULES ? true : undefined;
    }, 60_000, 'every schedule to fire');
    await eventually(async () => {
      const open = await db.selectFrom('runs').select('id').where('source_id', 'in', ids).where('status', 'in', ['pending', 'running']).execute();
      return open.length === 0 ? true : undefined;
    }, 60_000, 'the runs to finish');
    // Both processes keep polling for a while after the tick: still exactly one run per schedule.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const runs = await db.selectFrom('runs').select(['source_id', 'status']).where('source_id', 'in', ids).execute();
    const perSchedule = new Map<string, number>();
    for (const run of runs) perSchedule.set(run.source_id!, (perSchedule.get(run.source_id!) ?? 0) + 1);
    const doubled = [...perSchedule].filter(([, count]) => count > 1);
    assert.deepEqual(doubled, [], 'no schedule fired twice for one tick');
    assert.equal(runs.length, SCHEDULES);
    assert.ok(runs.every((run) => run.status === 'succeeded'));
    const events = await db.selectFrom('events').select('payload').where('type', '=', 'run.succeeded').execute();
    assert.equal(events.filter((row) => ids.some((id) => row.payload.includes(id))).length, SCHEDULES);
  });
});
