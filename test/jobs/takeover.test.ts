import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

/** Issue 27: a dead process's jobs must be taken over within 10 s, whatever their kind. */
const TAKEOVER_MS = 10_000;

/**
 * The real service as one API process and two worker processes on one
 * database, on the real clock. A worker is killed (SIGKILL) while it holds a
 * job of each kind that waits on something outside (a receiver that does not
 * answer, a command that takes seconds, a host slow to answer); the other
 * takes the job over within TAKEOVER_MS and finishes it, once. Then a worker
 * asked to stop (SIGTERM) while it holds runs: none of them fails for it.
 */
describe('jobs of a dead or stopping worker', { timeout: 240_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  let receiver: Receiver;
  let env: Record<string, string>;
  let api: ServiceProcess;
  const workers: ServiceProcess[] = [];
  let bearer: Record<string, string>;

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'takeover-'));
    database = await freshDatabase(join(dir, 'service.db'));
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    // The first request is never answered: its worker is killed while it waits.
    receiver = await startReceiver((_request, n) => (n === 1 ? 'hang' : { status: 200 }));
    env = { DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail'), RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on', MACHINE_BOOT_MS: '200' };
    api = await startServiceProcess({ ...env, ROLE: 'api' });
    const json = { 'content-type': 'application/json', origin: api.url };
    const registered = await fetch(`${api.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'takeover@example.com', password: 'correct horse battery', name: 'T' }) });
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${api.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 't' }) })).json()).key as string;
    bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  });
  after(async () => {
    for (const worker of workers) await worker.kill('SIGKILL');
    await api?.kill('SIGKILL');
    await db?.destroy();
    await receiver?.close();
    await database?.drop();
  });

  async function startWorker(): Promise<ServiceProcess> {
    const worker = await startServiceProcess({ ...env, ROLE: 'worker' });
    workers.push(worker);
    return worker;
  }

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${api.url}${path}`, { method, headers: bearer, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> & { id: string } };
  };

  /** Runner ids are `<host>/<pid>/<random>`: the process holding a job. */
  const holderOf = async (key: string): Promise<number | undefined> => {
    const job = await db.selectFrom('jobs').select(['locked_by', 'locked_until']).where('key', '=', key).executeTakeFirst();
    return job !== undefined && job.locked_by !== null && job.locked_until! > Date.now() ? Number(job.locked_by.split('/')[1]) : undefined;
  };
  const holderOfRun = async (runId: string): Promise<number | undefined> => {
    const jobs = await db.selectFrom('jobs').select(['locked_by', 'locked_until', 'payload']).where('kind', '=', 'run.execute').execute();
    const job = jobs.find((row) => JSON.parse(row.payload).runId === runId);
    return job !== undefined && job.locked_by !== null && job.locked_until! > Date.now() ? Number(job.locked_by.split('/')[1]) : undefined;
  };
  const workerWithPid = (pid: number | undefined) => workers.find((worker) => worker.child.pid === pid);

  /** Kills the worker holding the job, then answers how long the other took to hold it. */
  async function killHolderAndTimeTakeover(holder: () => Promise<number | undefined>, what: string): Promise<number> {
    const pid = await eventually(holder, 20_000, `a worker holding the ${what}`);
    const dying = workerWithPid(pid)!;
    assert.ok(dying, `held by one of the workers (pid ${pid})`);
    const killedAt = Date.now();
    assert.equal(await dying.kill('SIGKILL'), null, 'killed, not exited');
    workers.splice(workers.indexOf(dying), 1);
    const successor = workers[0]!.child.pid;
    await eventually(async () => ((await holder()) === successor ? true : undefined), 30_000, `the ${what} taken over`);
    return Date.now() - killedAt;
  }

  test("a killed worker's delivery, run and machine check are each taken over within 10 s, and finished once", async (t) => {
    await startWorker();
    await startWorker();
    assert.equal((await call('POST', '/api/event-webhooks', { url: receiver.url, events: ['machine.created'] })).status, 201);

    // A delivery whose attempt waits on a receiver that never answers.
    const first = await call('POST', '/api/machines', { name: 'first' });
    assert.equal(first.status, 201, JSON.stringify(first.json));
    await receiver.waitFor(1, 20_000);
    const deliveryTakeover = await killHolderAndTimeTakeover(async () => {
      const job = await db.selectFrom('jobs').select(['locked_by', 'locked_until']).where('kind', '=', 'webhook.delivery').executeTakeFirst();
      return job?.locked_by && job.locked_until! > Date.now() ? Number(job.locked_by.split('/')[1]) : undefined;
    }, 'delivery');
    await receiver.waitFor(2, TAKEOVER_MS);
    t.diagnostic(`delivery taken over ${deliveryTakeover} ms after the kill`);
    assert.ok(deliveryTakeover <= TAKEOVER_MS, `delivery taken over after ${deliveryTakeover} ms`);
    await eventually(async () => ((await call('GET', '/api/event-webhooks/deliveries')).json.data as Array<{ status: string }>)[0]?.status === 'delivered' || undefined, 20_000, 'delivered');

    // A run whose command takes seconds.
    await startWorker();
    await eventually(async () => ((await call('GET', `/api/machines/${first.json.id}`)).json.status === 'running' ? true : undefined), 20_000, 'the machine up');
    const run = (await call('POST', `/api/machines/${first.json.id}/runs`, { command: 'sleep 12' })).json;
    const runTakeover = await killHolderAndTimeTakeover(() => holderOfRun(run.id), 'run');
    t.diagnostic(`run taken over ${runTakeover} ms after the kill`);
    assert.ok(runTakeover <= TAKEOVER_MS, `run taken over after ${runTakeover} ms`);
    const finished = await eventually(async () => {
      const current = (await call('GET', `/api/runs/${run.id}`)).json;
      return current.status === 'succeeded' || current.status === 'failed' ? current : undefined;
    }, 30_000, 'the run to end');
    assert.equal(finished.status, 'succeeded', `finished from the machine's record, not failed as interrupted: ${JSON.stringify(finished)}`);
    assert.equal(finished.output, 'sleep 12');
    const runEvents = ((await call('GET', '/api/events?limit=100')).json.data as Array<{ type: string; data: { run?: { id: string } } }>).filter((event) => event.data.run?.id === run.id);
    assert.deepEqual(runEvents.map((event) => event.type), ['run.succeeded'], 'once');

    // A machine check whose host takes seconds to answer.
    await startWorker();
    const slow = (await call('POST', '/api/machines', { name: 'slow', labels: { simulate: 'slow-host' } })).json;
    const checkTakeover = await killHolderAndTimeTakeover(() => holderOf(`machine.check:${slow.id}`), 'machine check');
    t.diagnostic(`machine check taken over ${checkTakeover} ms after the kill`);
    assert.ok(checkTakeover <= TAKEOVER_MS, `machine check taken over after ${checkTakeover} ms`);
    await eventually(async () => ((await call('GET', `/api/machines/${slow.id}`)).json.status === 'running' ? true : undefined), 20_000, 'the slow machine up');
    const created = ((await call('GET', '/api/events?type=machine.created&limit=100')).json.data as Array<{ data: { machine: { id: string } } }>).filter((event) => event.data.machine.id === slow.id);
    assert.equal(created.length, 1, 'machine.created once');
  });

  test('a worker asked to stop while it holds runs finishes the short one and hands the long one over; none fails', async () => {
    for (const worker of workers.splice(0)) await worker.kill('SIGKILL');
    const stopping = await startWorker();
    const machine = (await call('POST', '/api/machines', { name: 'busy' })).json;
    await eventually(async () => ((await call('GET', `/api/machines/${machine.id}`)).json.status === 'running' ? true : undefined), 20_000, 'the machine up');
    const short = (await call('POST', `/api/machines/${machine.id}/runs`, { command: 'sleep 3' })).json;
    const long = (await call('POST', `/api/machines/${machine.id}/runs`, { command: 'sleep 16' })).json;
    for (const run of [short, long]) await eventually(async () => ((await holderOfRun(run.id)) === stopping.child.pid ? true : undefined), 20_000, 'held by the worker');
    const successor = await startWorker();
    const askedAt = Date.now();
    assert.equal(await stopping.kill('SIGTERM'), 0, `stopped in order: ${stopping.stderr()}${stopping.stdout()}`);
    workers.splice(workers.indexOf(stopping), 1);
    // The grace is WEBHOOK_TIMEOUT_MS (10 s); an aborted attempt gets a second more to answer.
    assert.ok(Date.now() - askedAt < 10_000 + 5_000, `stopped after ${Date.now() - askedAt} ms`);
    for (const run of [short, long]) {
      const ended = await eventually(async () => {
        const current = (await call('GET', `/api/runs/${run.id}`)).json;
        return current.status === 'succeeded' || current.status === 'failed' ? current : undefined;
      }, 30_000, `run ${run.command} to end`);
      assert.equal(ended.status, 'succeeded', JSON.stringify(ended));
    }
    assert.ok(successor.child.exitCode === null, 'the other worker finished the long one');
  });
});
