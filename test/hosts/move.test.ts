import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtemp, rename } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { setHostState } from '../../src/hosts/hosts.repository.ts';
import { drainHost } from '../../src/hosts/hosts.admin.ts';
import { drainAndMove, followMoves, moveTestHooks } from '../../src/machines/moves.service.ts';
import { MACHINE_ID_LABEL } from '../../src/providers/docker/container-spec.ts';
import { asBearer, type TestContext } from '../support/app.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { dockerUnavailable, runToEnd, startDockerApp, type DockerApp } from '../support/docker.ts';
import { startTestEngines, stopTestEngine, type TestEngine } from '../support/engines.ts';
import { eventsOf, type Owner } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();
const run = promisify(execFile);

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'move-test', version: '1.0.0' } },
};
const MCP_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

/**
 * drain --move over two real engines (`dockerd`s in network namespaces of
 * their own): a machine's disk, token and runs' records go with it to the
 * other host; a service killed in the middle of a move and started again ends
 * with exactly one copy of the machine; a machine with nowhere to go stays
 * where it is; a host lacking the machine image gets it from the other host.
 */
describe('moving machines off a draining host', { skip, timeout: 1_500_000 }, () => {
  let engines: [TestEngine, TestEngine];
  let database: TestDatabase;
  let docker: DockerApp | null = null;
  let owner: Owner;
  let hostsEnv: Record<string, string>;

  before(async () => {
    engines = (await startTestEngines([4, 5])) as [TestEngine, TestEngine];
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'move-')), 'service.db'));
    hostsEnv = {
      MACHINE_HOSTS: engines.map((engine) => `${engine.name}=${engine.address}`).join(','),
      MACHINE_CPU_OVERCOMMIT: '1',
      MACHINE_SIZES: 'small=1/512m/512/2g,medium=2/1g/1024/4g,large=4/2g/2048/8g',
      // A closing app waits this long for its jobs in flight: a move held in a test hook is then left as a crash leaves it.
      WEBHOOK_TIMEOUT_MS: '1000',
    };
  });
  after(async () => {
    moveTestHooks.afterStep = undefined;
    await docker?.close();
    await Promise.all(engines.map((engine) => stopTestEngine(engine)));
    await database?.drop();
  });

  const start = () => startDockerApp({ database, env: hostsEnv });
  const ctx = (): TestContext => docker!.ctx;
  const call = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown) =>
    ctx().app.inject({ method, url, headers: asBearer(owner.key), ...(payload === undefined ? {} : { payload: payload as object }) });
  const machineRow = async (id: string) => ({ ...(await ctx().app.deps.db.selectFrom('machines').select(['host', 'status']).where('id', '=', id).executeTakeFirstOrThrow()) });
  const untilStatus = (id: string, status: string) =>
    eventually(async () => ((await call('GET', `/api/machines/${id}`)).json().status === status ? true : undefined), 180_000, `machine ${id} ${status}`);
  /** The machine's containers on each engine: [running or not] per engine. */
  const copiesOf = async (id: string) =>
    Promise.all(
      engines.map(async (engine) => (await engine.docker.listContainers({ all: true, filters: { label: [`${MACHINE_ID_LABEL}=${id}`] } })).map((container) => container.State)),
    );
  const engineNamed = (name: string) => engines.find((engine) => engine.name === name)!;
  const otherThan = (name: string) => engines.find((engine) => engine.name !== name)!;
  const readFile = async (id: string, path: string) => (await call('GET', `/api/machines/${id}/files?path=${encodeURIComponent(path)}`)).body;

  test('a host lacking the machine image gets it from the other host when it is attached', async () => {
    const lacking = engines[1];
    for (const container of await lacking.docker.listContainers({ all: true })) await lacking.docker.getContainer(container.Id).remove({ force: true, v: true });
    await lacking.docker.getImage(DEFAULT_MACHINE_IMAGE).remove({ force: true });
    await assert.rejects(lacking.docker.getImage(DEFAULT_MACHINE_IMAGE).inspect());

    docker = await start();
    owner = docker.owner;
    await lacking.docker.getImage(DEFAULT_MACHINE_IMAGE).inspect();
    assert.deepEqual([...ctx().app.machineProvider.hosts!.attached()].sort(), engines.map((engine) => engine.name).sort());
  });

  let machineId: string;
  let mcpToken: string;
  let runId: string;

  test('drain --move carries a running machine, its files and its token to the other host, running there; its runs stay readable', async () => {
    const created = await call('POST', '/api/machines', { name: 'mover' });
    assert.equal(created.statusCode, 201, created.body);
    ({ id: machineId, mcpToken } = created.json());
    await untilStatus(machineId, 'running');
    const from = (await machineRow(machineId)).host!;
    const written = await ctx().app.inject({ method: 'PUT', url: `/api/machines/${machineId}/files?path=/root/carried.txt`, payload: 'carried over', headers: { ...asBearer(owner.key), 'content-type': 'application/octet-stream' } });
    assert.equal(written.statusCode, 204, written.body);
    const finished = await runToEnd(owner, machineId, { command: 'echo before the move' });
    assert.equal(finished.status, 'succeeded', JSON.stringify(finished));
    runId = finished.id;

    const machineIds = await drainAndMove(ctx().app.deps, from);
    assert.deepEqual(machineIds, [machineId]);
    const said: string[] = [];
    const ended = await followMoves(ctx().app.deps, machineIds, (line) => said.push(line), 200);
    assert.deepEqual(ended.map((move) => move.step), ['done'], said.join('\n'));

    const to = otherThan(from).name;
    assert.equal((await machineRow(machineId)).host, to);
    await untilStatus(machineId, 'running');
    const copies = await copiesOf(machineId);
    assert.deepEqual(copies[engines.indexOf(engineNamed(from))], [], 'no container left on the old host');
    assert.deepEqual(copies[engines.indexOf(engineNamed(to))], ['running']);
    assert.equal(await readFile(machineId, '/root/carried.txt'), 'carried over');
    const mcp = await ctx().app.inject({ method: 'POST', url: `/api/machines/${machineId}/mcp`, headers: { ...asBearer(mcpToken), ...MCP_HEADERS }, payload: INITIALIZE });
    assert.equal(mcp.statusCode, 200, mcp.body);
    const kept = (await call('GET', `/api/runs/${runId}`)).json();
    assert.equal(kept.status, 'succeeded');
    assert.equal(kept.stdout, 'before the move\n');
    const again = await runToEnd(owner, machineId, { command: 'cat /root/carried.txt' });
    assert.equal(again.stdout, 'carried over');

    // To its owner, a restart by the platform: machine.stopped (platform), then machine.started; never a host's name.
    const events = (await eventsOf(ctx(), owner)).filter((event) => (event.data as { machine?: { id: string } }).machine?.id === machineId);
    const types = events.map((event) => event.type);
    const stopped = types.lastIndexOf('machine.stopped');
    assert.ok(stopped >= 0 && types.lastIndexOf('machine.started') > stopped, types.join(' '));
    assert.equal((events[stopped]!.data as { detail?: { reason?: string } }).detail?.reason, 'platform');
    assert.doesNotMatch(JSON.stringify(events), /mp-host/);
    assert.doesNotMatch((await call('GET', `/api/machines/${machineId}`)).body, /mp-host/);
  });

  test('a service killed after the copy and before the commit: started again, it finishes the move, and exactly one copy is left', async () => {
    const from = (await machineRow(machineId)).host!;
    const to = otherThan(from).name;
    await setHostState(ctx().app.deps.db, to, 'active', Date.now());
    let reached!: () => void;
    const copied = new Promise<void>((resolve) => (reached = resolve));
    moveTestHooks.afterStep = async (_id, step) => {
      if (step !== 'copied') return;
      reached();
      await new Promise(() => {});
    };
    await drainAndMove(ctx().app.deps, from);
    await copied;
    // As a crash leaves it: stopped on the old host, a copy not started on the new one, the record still naming the old.
    await docker!.ctx.close();
    docker = null;
    moveTestHooks.afterStep = undefined;
    const copies = await copiesOf(machineId);
    assert.deepEqual(copies.flat().sort(), ['created', 'exited']);

    docker = await start();
    const db = ctx().app.deps.db;
    await eventually(async () => ((await db.selectFrom('machine_moves').select('step').where('machine_id', '=', machineId).executeTakeFirstOrThrow()).step === 'done' ? true : undefined), 180_000, 'the move done');
    assert.equal((await machineRow(machineId)).host, to);
    await untilStatus(machineId, 'running');
    const after = await copiesOf(machineId);
    assert.deepEqual(after[engines.indexOf(engineNamed(to))], ['running']);
    assert.deepEqual(after[engines.indexOf(engineNamed(from))], []);
    assert.equal(await readFile(machineId, '/root/carried.txt'), 'carried over');
  });

  test('a stopped machine, the service killed after the commit: started again, it removes the old copy; the machine stays stopped', async () => {
    assert.equal((await call('POST', `/api/machines/${machineId}/stop`)).statusCode, 200);
    await untilStatus(machineId, 'stopped');
    const from = (await machineRow(machineId)).host!;
    const to = otherThan(from).name;
    await setHostState(ctx().app.deps.db, to, 'active', Date.now());
    let reached!: () => void;
    const committed = new Promise<void>((resolve) => (reached = resolve));
    moveTestHooks.afterStep = async (_id, step) => {
      if (step !== 'committed') return;
      reached();
      await new Promise(() => {});
    };
    await drainAndMove(ctx().app.deps, from);
    await committed;
    await docker!.ctx.close();
    docker = null;
    moveTestHooks.afterStep = undefined;

    docker = await start();
    const db = ctx().app.deps.db;
    await eventually(async () => ((await db.selectFrom('machine_moves').select('step').where('machine_id', '=', machineId).executeTakeFirstOrThrow()).step === 'done' ? true : undefined), 180_000, 'the move done');
    assert.deepEqual(await machineRow(machineId), { host: to, status: 'stopped' });
    const copies = await copiesOf(machineId);
    assert.deepEqual(copies[engines.indexOf(engineNamed(to))], ['created']);
    assert.deepEqual(copies[engines.indexOf(engineNamed(from))], []);
    assert.equal((await call('POST', `/api/machines/${machineId}/start`)).statusCode, 200);
    await untilStatus(machineId, 'running');
    assert.equal(await readFile(machineId, '/root/carried.txt'), 'carried over');
  });

  test('a machine from a template whose host is draining goes to another host, which gets the template’s image first', async () => {
    const templateHost = (await machineRow(machineId)).host!;
    const other = otherThan(templateHost);
    const saved = await call('POST', '/api/templates', { machineId, name: 'carried' });
    assert.equal(saved.statusCode, 201, saved.body);
    const image = `machine-platform/template:${saved.json().id}`;
    await assert.rejects(other.docker.getImage(image).inspect());
    await setHostState(ctx().app.deps.db, other.name, 'active', Date.now());
    await drainHost(ctx().app.deps.db, templateHost, Date.now());

    const made = await call('POST', '/api/machines', { name: 'from-template', template: 'carried' });
    assert.equal(made.statusCode, 201, made.body);
    const madeId = made.json().id as string;
    assert.equal((await machineRow(madeId)).host, other.name);
    await untilStatus(madeId, 'running');
    await other.docker.getImage(image).inspect();
    assert.equal(await readFile(madeId, '/root/carried.txt'), 'carried over');
    assert.equal((await call('POST', `/api/machines/${madeId}/stop`)).statusCode, 200);
    await untilStatus(madeId, 'stopped');

    // drain --move carries the template (its record, and its image where the other host lacks it) with the machines.
    await other.docker.getImage(image).remove({ force: true });
    const ended = await followMoves(ctx().app.deps, await drainAndMove(ctx().app.deps, templateHost), () => {}, 200);
    assert.deepEqual(ended.map((move) => move.step), ['done']);
    const templateOf = async () => (await ctx().app.deps.db.selectFrom('templates').select('host').where('id', '=', saved.json().id).executeTakeFirstOrThrow()).host;
    await eventually(async () => ((await templateOf()) === other.name ? true : undefined), 120_000, 'the template on the other host');
    await other.docker.getImage(image).inspect();
  });

  test('a machine with nowhere to go stays where it is, running, and its host stays draining', async () => {
    const from = (await machineRow(machineId)).host!;
    const to = otherThan(from).name;
    await drainHost(ctx().app.deps.db, to, Date.now());
    const said: string[] = [];
    const ended = await followMoves(ctx().app.deps, await drainAndMove(ctx().app.deps, from), (line) => said.push(line), 200);
    assert.equal(ended[0]?.step, 'failed');
    assert.match(said.join('\n'), /no active host has room for a small machine: it stays on/);
    assert.deepEqual(await machineRow(machineId), { host: from, status: 'running' });
    const state = await ctx().app.deps.db.selectFrom('hosts').select('state').where('name', '=', from).executeTakeFirstOrThrow();
    assert.equal(state.state, 'draining');
  });

  test('a copy that fails (the new host out of reach) rolls the move back: the machine runs again where it was, with its files', async () => {
    const from = (await machineRow(machineId)).host!;
    const to = otherThan(from);
    await setHostState(ctx().app.deps.db, to.name, 'active', Date.now());
    // Out of reach as an engine that went away, its daemon and containers left running (taken down after as ever):
    // its socket moved aside, and the keep-alive connections this process holds to it closed as they fall idle.
    const socket = new URL(to.address).pathname;
    await rename(socket, `${socket}.away`);
    const dropIdle = () => {
      for (const [name, sockets] of Object.entries(http.globalAgent.freeSockets)) if (name.includes(socket)) for (const idle of sockets ?? []) idle.destroy();
    };
    dropIdle();
    const dropping = setInterval(dropIdle, 10);
    let ended;
    const said: string[] = [];
    try {
      ended = await followMoves(ctx().app.deps, await drainAndMove(ctx().app.deps, from), (line) => said.push(line), 200);
    } finally {
      clearInterval(dropping);
      await rename(`${socket}.away`, socket);
    }
    const ours = ended.find((move) => move.machine_id === machineId)!;
    assert.equal(ours.step, 'failed', said.join('\n'));
    assert.match(ours.outcome!, new RegExp(`the copy to ${to.name} failed`));
    assert.equal((await machineRow(machineId)).host, from);
    await untilStatus(machineId, 'running');
    const onOldHost = await engineNamed(from).docker.listContainers({ all: true, filters: { label: [`${MACHINE_ID_LABEL}=${machineId}`] } });
    assert.deepEqual(onOldHost.map((container) => container.State), ['running']);
    assert.equal(await readFile(machineId, '/root/carried.txt'), 'carried over');
  });

  test('drain --move of an unknown host is refused with one line, and nothing is recorded', async () => {
    const db = ctx().app.deps.db;
    // Their states (the host watch records each engine's answers in last_seen_at meanwhile).
    const hostStates = () => db.selectFrom('hosts').select(['name', 'state', 'state_changed_at']).orderBy('name').execute();
    const hostsBefore = await hostStates();
    const movesBefore = await db.selectFrom('machine_moves').selectAll().orderBy('machine_id').execute();
    const refused = await run(process.execPath, ['scripts/hosts.ts', 'drain', 'no-such-host', '--move'], { env: { ...process.env, DATABASE_URL: urlWithSchema(database) } }).then(
      () => assert.fail('the command was not refused'),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    assert.equal(refused.code, 2);
    assert.equal(refused.stdout, '');
    assert.equal(refused.stderr, 'there is no host named no-such-host\n');
    assert.deepEqual(await hostStates(), hostsBefore);
    assert.deepEqual(await db.selectFrom('machine_moves').selectAll().orderBy('machine_id').execute(), movesBefore);
  });
});
