import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { claimScheduleTick, findScheduleById } from '../../src/runs/schedules.repository.ts';
import type { TestContext } from '../support/app.ts';
import { freshDatabase, onPostgres, type TestDatabase } from '../support/database.ts';
import { BOOT_MS, createMachine, createMachineTestApp, eventsOf, newOwner, runningMachine, runsSettled, workerPass } from '../support/machines.ts';

const at = (hh: number, mm: number) => Date.UTC(2026, 10, 22, hh, mm, 0);

/** One database two apps can share: a Postgres schema, or an SQLite file (in-memory databases are per connection). */
async function sharedDatabase(): Promise<{ database: TestDatabase; cleanup(): Promise<void> }> {
  if (onPostgres) {
    const database = await freshDatabase();
    return { database, cleanup: () => database.drop() };
  }
  const dir = await mkdtemp(join(tmpdir(), 'machines-'));
  const database = await freshDatabase(join(dir, 'service.db'));
  return { database, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('the machine worker across processes', () => {
  let shared: Awaited<ReturnType<typeof sharedDatabase>>;
  let first: TestContext;
  let second: TestContext;
  before(async () => {
    shared = await sharedDatabase();
    first = await createMachineTestApp({ database: shared.database });
    second = await createMachineTestApp({ database: shared.database });
  });
  after(async () => {
    await first.close();
    await second.close();
    await shared.cleanup();
  });

  const setBoth = (epochMs: number) => {
    first.clock.set(epochMs);
    second.clock.set(epochMs);
  };
  /**
   * Both instances pass at once on Postgres. On SQLite, node:sqlite waits for
   * a lock synchronously, which would stall the one event loop both apps share
   * here, so they take turns; separate processes wait on the file lock instead.
   */
  const tickBoth = async () => {
    if (onPostgres) await Promise.all([first.app.jobs.drain(), second.app.jobs.drain()]);
    else {
      await first.app.jobs.drain();
      await second.app.jobs.drain();
    }
    // Runs execute in the background of whichever instance queued them.
    await runsSettled(first);
    await runsSettled(second);
  };

  test('a schedule fires exactly once per tick with two instances on one database', async () => {
    setBoth(at(10, 0));
    const owner = await newOwner(first);
    const machine = await createMachine(owner, { name: 'shared' });
    setBoth(at(10, 0) + BOOT_MS);
    await tickBoth();
    const schedule = (await owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'minutely', cron: '* * * * *', command: 'tick' })).json();

    for (let minute = 1; minute <= 5; minute++) {
      setBoth(at(10, minute));
      await tickBoth();
      await tickBoth();
    }
    const runs = (await owner.call('GET', `/api/machines/${machine.id}/runs?limit=100`)).json().data;
    assert.equal(runs.length, 5, 'one run per tick, not one per instance');
    assert.ok(runs.every((run: { sourceId: string; status: string }) => run.sourceId === schedule.id && run.status === 'succeeded'));
    const events = await eventsOf(first, owner);
    assert.deepEqual(events.map((e) => e.type), ['machine.created', ...Array(5).fill('run.succeeded')], 'the boot too was applied once');
  });

  test('claiming a tick is a compare-and-set: of two instances that read the same due tick, one fires it', async () => {
    setBoth(at(10, 0));
    const owner = await newOwner(first);
    const machine = await runningMachine(first, owner, { name: 'raced' });
    const schedule = (await owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'raced', cron: '30 10 * * *', command: 'once' })).json();
    // Both instances read the due schedule before either claims it (the race a sequential test cannot show on SQLite).
    const row = (await findScheduleById(first.app.deps.db, schedule.id))!;
    assert.deepEqual(await findScheduleById(second.app.deps.db, schedule.id), row);
    const next = at(10, 30) + 86_400_000;
    const claims = [await claimScheduleTick(first.app.deps.db, row, next, at(10, 30)), await claimScheduleTick(second.app.deps.db, row, next, at(10, 30))];
    assert.deepEqual(claims, [true, false]);
  });

  test('state lives in the database: a new instance finishes the boots and fires the schedules of a closed one', async () => {
    setBoth(at(12, 0));
    const owner = await newOwner(first);
    const booting = await createMachine(owner, { name: 'survivor' });
    const running = await runningMachine(first, owner, { name: 'scheduled' });
    await owner.call('POST', '/api/schedules', { machineId: running.id, name: 'after-restart', cron: '5 12 * * *', command: 'resume' });
    await first.close();

    first = await createMachineTestApp({ database: shared.database });
    setBoth(at(12, 5));
    await workerPass(first);
    const again = { ...owner, call: (method: 'GET', url: string) => first.app.inject({ method, url, headers: { authorization: `Bearer ${owner.key}` } }) };
    // Either instance may take up the work (on PostgreSQL the other hears it is due): wait for it to finish wherever it runs.
    await waitFor('the boot to finish', async () => (await again.call('GET', `/api/machines/${booting.id}`)).json().status === 'running');
    await waitFor('the scheduled run to finish', async () => (await again.call('GET', `/api/machines/${running.id}/runs`)).json().data[0]?.status === 'succeeded');
    const runs = (await again.call('GET', `/api/machines/${running.id}/runs`)).json().data;
    assert.equal(runs.length, 1);
    assert.equal(runs[0].status, 'succeeded');
  });
});

describe('the worker loop', () => {
  test('runs by itself every MACHINE_WORKER_INTERVAL_MS, with no one calling tick()', async () => {
    const ctx = await createMachineTestApp({ env: { MACHINE_BOOT_MS: '0', MACHINE_WORKER_INTERVAL_MS: '20' } });
    try {
      const owner = await newOwner(ctx);
      const machine = await createMachine(owner, { name: 'autonomous' });
      await waitFor('the boot', async () => (await owner.call('GET', `/api/machines/${machine.id}`)).json().status === 'running');
      assert.deepEqual((await eventsOf(ctx, owner)).map((e) => e.type), ['machine.created']);
    } finally {
      await ctx.close();
    }
  });

  test('ROLE=api serves machines but runs no loop; ROLE=worker runs the loop but serves no machine routes', async () => {
    const shared = await sharedDatabase();
    const env = { MACHINE_BOOT_MS: '0', MACHINE_WORKER_INTERVAL_MS: '20' };
    const api = await createMachineTestApp({ database: shared.database, env: { ...env, ROLE: 'api' } });
    let worker: TestContext | undefined;
    try {
      const owner = await newOwner(api);
      const machine = await createMachine(owner, { name: 'split' });
      await sleep(200);
      assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'starting', 'the API process boots nothing');

      // From here the API process only reads, so the two apps never wait on each other's SQLite write lock in this one event loop.
      worker = await createMachineTestApp({ database: shared.database, env: { ...env, ROLE: 'worker' } });
      worker.clock.set(api.clock.now());
      const headers = { authorization: `Bearer ${owner.key}` };
      assert.equal((await worker.app.inject({ method: 'GET', url: '/api/machines', headers })).statusCode, 404);
      assert.equal((await worker.app.inject({ method: 'POST', url: '/api/mcp', headers, payload: {} })).statusCode, 404);
      await waitFor('the worker process to boot it', async () => (await owner.call('GET', `/api/machines/${machine.id}`)).json().status === 'running');
    } finally {
      await api.close();
      await worker?.close();
      await shared.cleanup();
    }
  });
});
