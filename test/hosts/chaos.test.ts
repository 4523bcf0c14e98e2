import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { containerName, MACHINE_ID_LABEL, RECORDS_DIR } from '../../src/providers/docker/container-spec.ts';
import { INTERRUPTED_RUN_OUTPUT } from '../../src/runs/runs.service.ts';
import { card } from '../billing/helpers.ts';
import { freshDatabase, onPostgres, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { DOCKER_TEST_ENV, dockerUnavailable } from '../support/docker.ts';
import { startTestEngines, stopTestEngine, type TestEngine } from '../support/engines.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

const skip = !onPostgres ? 'PostgreSQL only: two service processes share one database (DATABASE_URL=postgres://…)' : await dockerUnavailable();

const MACHINES = 30;
/** Each engine reports 2 CPUs: at 5.5 CPUs per CPU, 11 small machines (1 CPU) fill a host, 33 the platform. */
const PER_HOST = 11;
const LOST_AFTER_MS = 3000;
/** A lost host's machines are in error within this (CONTRACT 21 with MACHINE_HOST_LOST_AFTER_MS of 3 s, and room to spare). */
const LOST_WITHIN_MS = 45_000;
/**
 * How long the engine stays down: past the time a run used to be failed for its host's silence (four attempts, 5 + 10
 * + 20 s apart), so that the run's outcome can only come from the machine's record.
 */
const OUTAGE_MS = 40_000;
const RUN_SECONDS = 20;

async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

interface Envelope {
  type: string;
  data: { machine?: { id: string }; detail?: { reason?: string } };
}

/**
 * Issue 43 under chaos: two real service processes (PostgreSQL), three real
 * engines, thirty machines; one engine killed with SIGKILL while a run
 * executes on it, then started again. Each service runs in a PID namespace of
 * its own, as a service in its own container does: it reaches the machines'
 * agents through their engines, so a killed engine cuts them off as a lost
 * host would.
 */
describe('chaos: a host killed and started again under two service processes', { skip, timeout: 900_000 }, () => {
  let engines: TestEngine[] = [];
  let database: TestDatabase;
  let db: Kysely<DB>;
  const services: ServiceProcess[] = [];
  let key = '';
  const started = performance.now();
  const timings: Record<string, number> = {};
  const mark = (what: string) => (timings[what] = Math.round(performance.now() - started));

  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hosts-chaos-'));
    [engines, database] = await Promise.all([startTestEngines([6, 7, 8]), freshDatabase()]);
    db = connectDatabase(database.url, { schema: database.schema! }).db;
    mark('engines up');
    const env = {
      ...DOCKER_TEST_ENV,
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: join(dir, 'mail'),
      RATE_LIMIT: 'off',
      LOG_LEVEL: 'error',
      MACHINE_PROVIDER: 'docker',
      MACHINE_HOSTS: engines.map((engine) => `${engine.name}=${engine.address}`).join(','),
      MACHINE_HOST_LOST_AFTER_MS: String(LOST_AFTER_MS),
      MACHINE_CPU_OVERCOMMIT: String(PER_HOST / 2),
      MACHINE_SIZES: 'small=1/512m/512/2g,medium=2/1g/1024/4g',
      BILLING: 'on',
      // 1 µ$ a millisecond for a small machine, charged every second: any time billed after the loss shows.
      MACHINE_PRICES: 'small=3.6,medium=7.2',
      METERING_INTERVAL: '1s',
      JOBS_POLL_INTERVAL_MS: '250',
    };
    const wrap = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child'];
    // The first alone: it migrates the schema; then the second.
    services.push(await startServiceProcess(env, { wrap }));
    services.push(await startServiceProcess(env, { wrap }));
    mark('services up');
    const [first] = services as [ServiceProcess];
    const json = { 'content-type': 'application/json', origin: first.url };
    const registered = await fetch(`${first.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'chaos@example.com', password: 'correct horse battery', name: 'Chaos' }) });
    assert.equal(registered.status, 201, await registered.text());
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    key = ((await (await fetch(`${first.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'chaos' }) })).json()) as { key: string }).key;
    assert.equal((await call(first, 'PUT', '/api/billing/payment-method', card())).status, 200);
    assert.equal((await call(first, 'POST', '/api/billing/top-ups', { amount: '1000.00' })).status, 201);
  });
  after(async () => {
    for (const service of services) await service.kill('SIGKILL');
    // Every container of the test goes with its engine: one left killed is started again for that (its API removes them).
    await Promise.allSettled(engines.map(async (engine) => {
      await engine.docker.ping().catch(() => engine.start());
      await stopTestEngine(engine);
    }));
    await db?.destroy();
    await database?.drop();
    console.log(`chaos timings (ms since the start): ${JSON.stringify(timings)}`);
  });

  async function call(service: ServiceProcess, method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return fetch(`${service.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  }
  const machinesOn = (host: string) => db.selectFrom('machines').select(['id', 'status', 'host']).where('host', '=', host).where('status', '!=', 'destroyed').execute();
  const hostState = async (name: string) => (await db.selectFrom('hosts').select('state').where('name', '=', name).executeTakeFirstOrThrow()).state;
  const events = async () => (await db.selectFrom('events').select('payload').orderBy('id').execute()).map((row) => JSON.parse(row.payload) as Envelope);
  const eventOf = (all: Envelope[], type: string, machineId: string) => all.find((event) => event.type === type && event.data.machine?.id === machineId);
  const counts = async () => ({
    machines: (await db.selectFrom('machines').select('id').execute()).length,
    runs: (await db.selectFrom('runs').select('id').execute()).length,
  });
  /** Each engine's machine containers: id → running. */
  const containersOf = async (engine: TestEngine) =>
    new Map((await engine.docker.listContainers({ all: true, filters: { label: [MACHINE_ID_LABEL] } })).map((container) => [container.Labels[MACHINE_ID_LABEL]!, container.State === 'running']));

  test('30 machines over three hosts; one host killed while runs execute on it: its machines error (host-lost) and unbilled, new machines elsewhere; back: every machine as it really is, the runs finished from their records, nothing lost or running twice', async () => {
    const [lostEngine, ...others] = engines as [TestEngine, TestEngine, TestEngine];

    // Thirty at once, half through each process.
    const created = await Promise.all(Array.from({ length: MACHINES }, (_, i) => call(services[i % 2]!, 'POST', '/api/machines', { name: `chaos-${i}`, size: 'small' })));
    for (const response of created) assert.equal(response.status, 201, await response.clone().text());
    const ids = await Promise.all(created.map(async (response) => ((await response.json()) as { id: string }).id));
    mark('30 created');
    const perHost = new Map<string, number>();
    for (const row of await db.selectFrom('machines').select('host').where('id', 'in', ids).execute()) perHost.set(row.host!, (perHost.get(row.host!) ?? 0) + 1);
    assert.deepEqual([...perHost.keys()].sort(), engines.map((engine) => engine.name));
    const spread = [...perHost.values()];
    assert.ok(Math.max(...spread) <= PER_HOST, `none over its host's capacity: ${JSON.stringify([...perHost])}`);
    assert.ok(Math.max(...spread) - Math.min(...spread) <= 1, `spread within one of even: ${JSON.stringify([...perHost])}`);

    await until('every machine running', 600_000, async () => {
      const rows = await db.selectFrom('machines').select('status').where('id', 'in', ids).execute();
      const bad = rows.filter((row) => row.status !== 'running' && row.status !== 'starting');
      assert.deepEqual(bad, [], 'no machine failed to boot');
      return rows.every((row) => row.status === 'running') ? true : undefined;
    });
    mark('30 running');
    for (const engine of engines) {
      const containers = await containersOf(engine);
      const mine = (await machinesOn(engine.name)).map((machine) => machine.id).sort();
      assert.deepEqual([...containers.keys()].sort(), mine, `containers on ${engine.name}`);
    }

    // Two runs under way on the host about to be lost: one ends while its engine is down, one would outlive the outage.
    const doomed = (await machinesOn(lostEngine.name)).map((machine) => machine.id);
    const startRun = async (machineId: string, command: string) => {
      const response = await call(services[1]!, 'POST', `/api/machines/${machineId}/runs`, { command });
      assert.equal(response.status, 201, await response.clone().text());
      const runId = ((await response.json()) as { id: string }).id;
      // Executing on the machine: its record is on the machine's disk (the run is `running` a moment before the agent has it).
      const machineContainer = lostEngine.docker.getContainer(containerName(machineId));
      await until('the run executing on the machine', 60_000, async () =>
        (await machineContainer.infoArchive({ path: `${RECORDS_DIR}/runs/${runId}/stdout` }).then(() => true, () => undefined)));
      return runId;
    };
    const [runId, longRunId] = await Promise.all([startRun(doomed[0]!, `sleep ${RUN_SECONDS}; echo done`), startRun(doomed[1]!, 'sleep 3600; echo never')]);
    const runStatus = async (id = runId) => (await db.selectFrom('runs').select(['status', 'exit_code', 'stdout', 'output']).where('id', '=', id).executeTakeFirstOrThrow());
    assert.equal((await runStatus()).status, 'running');
    assert.equal((await runStatus(longRunId)).status, 'running');
    const before = await counts();

    await lostEngine.kill();
    const killedAt = performance.now();
    mark('engine killed');
    await until(`the machines of ${lostEngine.name} in error`, LOST_WITHIN_MS, async () => ((await machinesOn(lostEngine.name)).every((machine) => machine.status === 'error') ? true : undefined));
    mark('its machines in error');
    assert.equal(await hostState(lostEngine.name), 'lost');
    const afterLoss = await events();
    for (const id of doomed) assert.equal(eventOf(afterLoss, 'machine.error', id)?.data.detail?.reason, 'host-lost', id);

    // Billed no further: their meters closed, their charges still while the metering passes go on.
    const charged = async () => db.selectFrom('billing_meters').select(['machine_id', 'metered_until', 'charged_micros']).where('machine_id', 'in', doomed).orderBy('machine_id').execute();
    const chargedAtLoss = await charged();
    assert.equal(chargedAtLoss.length, doomed.length);
    assert.ok(chargedAtLoss.every((meter) => meter.metered_until === null), 'every meter of a lost machine closed');
    const stillRunning = (await machinesOn(others[0]!.name))[0]!.id;
    const runningMeter = () => db.selectFrom('billing_meters').select('updated_at').where('machine_id', '=', stillRunning).executeTakeFirstOrThrow();
    const meteredBefore = Number((await runningMeter()).updated_at);
    await until('two metering passes', 30_000, async () => (Number((await runningMeter()).updated_at) >= meteredBefore + 2000 ? true : undefined));
    assert.deepEqual(await charged(), chargedAtLoss, 'nothing charged for a lost machine');

    // New machines go to the two hosts left, through either process; the platform is then full.
    const extra = await Promise.all([0, 1].map((i) => call(services[i]!, 'POST', '/api/machines', { name: `after-loss-${i}`, size: 'small' })));
    for (const response of extra) assert.equal(response.status, 201, await response.clone().text());
    const extraIds = await Promise.all(extra.map(async (response) => ((await response.json()) as { id: string }).id));
    const extraHosts = await db.selectFrom('machines').select('host').where('id', 'in', extraIds).execute();
    assert.deepEqual(extraHosts.map((row) => row.host).sort(), others.map((engine) => engine.name).sort());
    const full = await call(services[0]!, 'POST', '/api/machines', { name: 'no-room', size: 'small' });
    assert.equal(full.status, 409, await full.clone().text());
    assert.equal(((await full.json()) as { code: string }).code, 'capacity_exhausted');

    // The runs' records stay, running, for as long as their host is lost: past the time a run used to be failed for the silence.
    while (performance.now() - killedAt < OUTAGE_MS) {
      assert.equal((await runStatus()).status, 'running', 'the run waits for its host');
      assert.equal((await runStatus(longRunId)).status, 'running', 'the run waits for its host');
      await sleep(1000);
    }

    await lostEngine.start();
    mark('engine started again');
    await until(`${lostEngine.name} active again`, 60_000, async () => ((await hostState(lostEngine.name)) === 'active' ? true : undefined));
    const back = await until(`the machines of ${lostEngine.name} in their real state`, 60_000, async () => {
      const now = await machinesOn(lostEngine.name);
      return now.every((machine) => machine.status === 'running' || machine.status === 'stopped') ? now : undefined;
    });
    mark('its machines back');
    console.log(`the lost host's machines came back: ${JSON.stringify(back.map((machine) => machine.status))}`);
    const afterBack = await events();
    for (const machine of back) {
      const [type, reason] = machine.status === 'running' ? ['machine.started', 'host-back'] : ['machine.stopped', 'platform'];
      assert.equal(eventOf(afterBack, type, machine.id)?.data.detail?.reason, reason, `${machine.id} ${machine.status}`);
    }

    // The runs, finished from what the machine's disk recorded, once each: the one whose command ended while its engine
    // was down with its real outcome; the one its restarted engine stopped (no live restore) as interrupted.
    const finishedOf = (id: string) => until(`the run ${id} finished`, 60_000, async () => {
      const run = await runStatus(id);
      return run.status === 'running' ? undefined : run;
    });
    const [finished, interrupted] = await Promise.all([finishedOf(runId), finishedOf(longRunId)]);
    mark('runs finished');
    assert.deepEqual(finished, { status: 'succeeded', exit_code: 0, stdout: 'done\n', output: 'done\n' });
    assert.equal(back.find((machine) => machine.id === doomed[1])?.status, 'stopped', 'its engine stopped it when it restarted');
    assert.deepEqual(interrupted, { status: 'failed', exit_code: null, stdout: null, output: INTERRUPTED_RUN_OUTPUT });
    const outcomes = (await events()).filter((event) => event.type.startsWith('run.'));
    assert.deepEqual(outcomes.map((event) => [(event.data as { run?: { id: string } }).run?.id, event.type]).sort(), [[runId, 'run.succeeded'], [longRunId, 'run.failed']].sort(), 'one outcome each, once');

    // Nothing lost: every machine and run recorded before is still there (and the two made meanwhile).
    const afterAll = await counts();
    assert.deepEqual(afterAll, { machines: before.machines + extraIds.length, runs: before.runs });

    // Nothing running twice: each machine's container runs on one engine at most, its own, and as its record says.
    await until('the new machines running', 300_000, async () => ((await db.selectFrom('machines').select('status').where('id', 'in', extraIds).execute()).every((row) => row.status === 'running') ? true : undefined));
    const containers = await Promise.all(engines.map(async (engine) => ({ engine: engine.name, containers: await containersOf(engine) })));
    const records = await db.selectFrom('machines').select(['id', 'host', 'status']).execute();
    for (const record of records) {
      const runningOn = containers.filter(({ containers: onEngine }) => onEngine.get(record.id) === true).map(({ engine }) => engine);
      assert.ok(runningOn.length <= 1, `${record.id} runs on ${runningOn.join(' and ')}`);
      assert.deepEqual(runningOn, record.status === 'running' ? [record.host] : [], `${record.id} (${record.status} on ${record.host}) runs on [${runningOn.join(', ')}]`);
      const holders = containers.filter(({ containers: onEngine }) => onEngine.has(record.id)).map(({ engine }) => engine);
      assert.deepEqual(holders, [record.host], `${record.id}'s container is on its own host only`);
    }
    for (const service of services) assert.equal(service.child.exitCode, null, `a service process died: ${service.stderr()}`);
    mark('checked');
  });
});
