import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { hostnameOf } from '../../src/providers/docker/container-spec.ts';
import { DOCKER_TEST_ENV, dockerUnavailable, removeMachineContainers } from '../support/docker.ts';
import { eventually } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

const skip = await dockerUnavailable();

/**
 * CONTRACT 15: a run whose service process dies is finished from the
 * machine's record by whichever process takes it over, never executed twice.
 * The real service as an API process and two workers; the worker waiting for
 * a five-second command is killed (SIGKILL) while it runs.
 */
describe('a real command outlives the worker that started it', { skip, timeout: 180_000 }, () => {
  let database: TestDatabase;
  let db: Kysely<DB>;
  const processes: ServiceProcess[] = [];
  let api: ServiceProcess;
  let bearer: Record<string, string>;

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'docker-takeover-'));
    database = await freshDatabase(join(dir, 'service.db'));
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    const env = { DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail'), RATE_LIMIT: 'off', MACHINE_PROVIDER: 'docker', ...DOCKER_TEST_ENV };
    // Each kept as soon as it runs: a later one failing to start must not leave the earlier ones running.
    api = await startServiceProcess({ ...env, ROLE: 'api' });
    processes.push(api);
    processes.push(await startServiceProcess({ ...env, ROLE: 'worker' }));
    processes.push(await startServiceProcess({ ...env, ROLE: 'worker' }));
    const json = { 'content-type': 'application/json', origin: api.url };
    const registered = await fetch(`${api.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'docker-takeover@example.com', password: 'correct horse battery', name: 'D' }) });
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const key = (await (await fetch(`${api.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'd' }) })).json()).key as string;
    bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGKILL');
    const machines = db ? await db.selectFrom('machines').select('id').execute() : [];
    await removeMachineContainers(machines.map((machine) => machine.id));
    await db?.destroy();
    await database?.drop();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${api.url}${path}`, { method, headers: bearer, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return (await response.json()) as Record<string, unknown> & { id: string };
  };

  test('SIGKILL while a 5-second command runs: the run ends succeeded with its real output, once, through the other worker', async () => {
    const machine = await call('POST', '/api/machines', { name: 'outliver' });
    await eventually(async () => ((await call('GET', `/api/machines/${machine.id}`)).status === 'running' ? true : undefined), 60_000, 'the machine up');
    const run = await call('POST', `/api/machines/${machine.id}/runs`, { command: 'echo begun; sleep 5; echo "done on $(hostname)"; echo warn >&2' });
    const holder = await eventually(async () => {
      const jobs = await db.selectFrom('jobs').select(['locked_by', 'payload']).where('kind', '=', 'run.execute').execute();
      const job = jobs.find((row) => JSON.parse(row.payload).runId === run.id && row.locked_by !== null);
      const current = await call('GET', `/api/runs/${run.id}`);
      return job && current.status === 'running' ? Number(job.locked_by!.split('/')[1]) : undefined;
    }, 30_000, 'a worker waiting for the command');
    const dying = processes.find((service) => service.child.pid === holder)!;
    assert.ok(dying && dying !== api, 'a worker holds it');
    assert.equal(await dying.kill('SIGKILL'), null);
    const finished = await eventually(async () => {
      const current = await call('GET', `/api/runs/${run.id}`);
      return current.status === 'succeeded' || current.status === 'failed' ? current : undefined;
    }, 60_000, 'the run to end');
    assert.deepEqual(
      [finished.status, finished.exitCode, finished.stdout, finished.stderr],
      ['succeeded', 0, `begun\ndone on ${hostnameOf(machine.id)}\n`, 'warn\n'],
      'executed once: the output of one execution',
    );
    const events = ((await call('GET', '/api/events?limit=100')).data as Array<{ type: string; data: { run?: { id: string } } }>).filter((event) => event.data.run?.id === run.id);
    assert.deepEqual(events.map((event) => event.type), ['run.succeeded']);
  });
});
