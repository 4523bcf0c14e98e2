import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { MACHINE_ID_LABEL } from '../../src/providers/docker/container-spec.ts';
import { dockerUnavailable, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { eventsOf } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';
import { startTestEngines, stopTestEngine, type TestEngine } from '../support/engines.ts';

const skip = await dockerUnavailable();

/**
 * Machines placed over three real engines, each a `dockerd` in a network
 * namespace of its own: every new machine goes to the host with the most
 * room, recorded with it in one transaction; a full platform answers
 * 409 capacity_exhausted and records nothing; everything about a machine goes
 * to its own host's engine.
 */
describe('placement over three hosts', { skip, timeout: 900_000 }, () => {
  let engines: TestEngine[] = [];
  let docker: DockerApp;

  before(async () => {
    engines = await startTestEngines([1, 2, 3]);
    docker = await startDockerApp({
      env: {
        MACHINE_HOSTS: engines.map((engine) => `${engine.name}=${engine.address}`).join(','),
        // Each engine has 2 CPUs: two small machines fill one, six the platform.
        MACHINE_CPU_OVERCOMMIT: '1',
        MACHINE_HOST_LOST_AFTER_MS: '3000',
        MACHINE_SIZES: 'small=1/512m/512/2g,medium=2/1g/1024/4g,large=4/2g/2048/8g',
      },
    });
  });
  after(async () => {
    await docker?.close();
    await Promise.all(engines.map((engine) => stopTestEngine(engine)));
  });

  const hostOf = async (machineId: string) => (await docker.ctx.app.deps.db.selectFrom('machines').select('host').where('id', '=', machineId).executeTakeFirstOrThrow()).host;
  const containersOn = async (engine: TestEngine) => (await engine.docker.listContainers({ all: true, filters: { label: [MACHINE_ID_LABEL] } })).map((container) => container.Labels[MACHINE_ID_LABEL]);

  test('six machines created at once spread two per host, each container on its own host’s engine; a seventh is 409 capacity_exhausted and recorded nowhere', async () => {
    const { owner } = docker;
    const created = await Promise.all(Array.from({ length: 6 }, (_, i) => owner.call('POST', '/api/machines', { name: `spread-${i}` })));
    for (const response of created) assert.equal(response.statusCode, 201, response.body);
    const ids = created.map((response) => response.json().id as string);
    const hosts = await Promise.all(ids.map(hostOf));
    const perHost = new Map<string, number>();
    for (const host of hosts) perHost.set(host!, (perHost.get(host!) ?? 0) + 1);
    assert.deepEqual([...perHost.entries()].sort(), engines.map((engine) => [engine.name, 2]));
    await Promise.all(ids.map((id) => untilStatus(owner, id, 'running', 180_000)));
    for (const engine of engines) {
      const expected = ids.filter((_, i) => hosts[i] === engine.name).sort();
      assert.deepEqual((await containersOn(engine)).sort(), expected, `containers on ${engine.name}`);
    }

    const before = await docker.ctx.app.deps.db.selectFrom('machines').select('id').execute();
    const refused = await owner.call('POST', '/api/machines', { name: 'one-too-many' });
    assert.equal(refused.statusCode, 409, refused.body);
    assert.equal(refused.json().code, 'capacity_exhausted');
    assert.match(refused.headers['content-type'] as string, /application\/problem\+json/);
    assert.equal((await docker.ctx.app.deps.db.selectFrom('machines').select('id').execute()).length, before.length);

    // Operators see each host in /metrics: its capacity, what its machines hold, how many, its state.
    const metrics = (await docker.ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    for (const engine of engines) {
      assert.match(metrics, new RegExp(`machine_host_capacity\\{host="${engine.name}",resource="cpus"\\} 2\\b`));
      assert.match(metrics, new RegExp(`machine_host_used\\{host="${engine.name}",resource="cpus"\\} 2\\b`));
      assert.match(metrics, new RegExp(`machine_host_used\\{host="${engine.name}",resource="memory_bytes"\\} ${2 * 512 * 1024 ** 2}\\b`));
      assert.match(metrics, new RegExp(`machine_host_machines\\{host="${engine.name}"\\} 2\\b`));
      assert.match(metrics, new RegExp(`machine_host_state\\{host="${engine.name}",state="active"\\} 1\\b`));
    }

    // Commands, files and the agent go to the machine's own host.
    const onSecond = ids[hosts.indexOf(engines[1]!.name)]!;
    const run = await runToEnd(owner, onSecond, { command: 'echo "$(hostname) on its host"' });
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.match(run.stdout ?? '', / on its host\n$/);
    const auth = { authorization: `Bearer ${owner.key}` };
    const written = await docker.ctx.app.inject({ method: 'PUT', url: `/api/machines/${onSecond}/files?path=/root/where.txt`, payload: 'second host', headers: { ...auth, 'content-type': 'application/octet-stream' } });
    assert.equal(written.statusCode, 204, written.body);
    const read = await docker.ctx.app.inject({ method: 'GET', url: `/api/machines/${onSecond}/files?path=/root/where.txt`, headers: auth });
    assert.equal(read.body, 'second host');

    // Room made on the third host: the next machine goes there.
    const onThird = ids[hosts.indexOf(engines[2]!.name)]!;
    assert.equal((await owner.call('DELETE', `/api/machines/${onThird}`)).statusCode, 200);
    await untilStatus(owner, onThird, 'destroyed');
    assert.ok(!(await containersOn(engines[2]!)).includes(onThird));
    const next = await owner.call('POST', '/api/machines', { name: 'room-again' });
    assert.equal(next.statusCode, 201, next.body);
    assert.equal(await hostOf(next.json().id), engines[2]!.name);
  });

  test('a host whose engine is killed is lost: its machines are error (host-lost) with machine.error, new machines go elsewhere; started again, it takes machines again and its machines are what they really are', async () => {
    const { owner, ctx } = docker;
    const [first, second] = engines as [TestEngine, TestEngine, TestEngine];
    const machinesOn = async (host: string) => ctx.app.deps.db.selectFrom('machines').select(['id', 'status']).where('host', '=', host).where('status', '!=', 'destroyed').execute();
    const onFirst = await machinesOn(first.name);
    assert.equal(onFirst.length, 2);
    await first.kill();
    await eventually(async () => ((await machinesOn(first.name)).every((machine) => machine.status === 'error') ? true : undefined), 60_000, 'machines of the killed host in error');
    const state = async (name: string) => (await ctx.app.deps.db.selectFrom('hosts').select('state').where('name', '=', name).executeTakeFirstOrThrow()).state;
    assert.equal(await state(first.name), 'lost');
    const events = await eventsOf(ctx, owner);
    for (const { id } of onFirst) {
      const error = events.find((event) => event.type === 'machine.error' && (event.data as { machine: { id: string } }).machine.id === id);
      assert.equal((error?.data as { detail?: { reason?: string } } | undefined)?.detail?.reason, 'host-lost', JSON.stringify(error));
    }

    // Room on the second host only: the lost one is never chosen.
    const onSecond = (await machinesOn(second.name))[0]!;
    assert.equal((await owner.call('DELETE', `/api/machines/${onSecond.id}`)).statusCode, 200);
    await untilStatus(owner, onSecond.id, 'destroyed');
    const next = await owner.call('POST', '/api/machines', { name: 'not-on-the-lost-one' });
    assert.equal(next.statusCode, 201, next.body);
    assert.equal(await hostOf(next.json().id), second.name);

    // Its owner destroys one while the host is lost: destroyed at once (billed no further), its container left for later.
    const [doomed, kept] = [onFirst[0]!, onFirst[1]!];
    const destroyed = await owner.call('DELETE', `/api/machines/${doomed.id}`);
    assert.equal(destroyed.statusCode, 200, destroyed.body);
    await untilStatus(owner, doomed.id, 'destroyed');
    assert.ok((await eventsOf(ctx, owner)).some((event) => event.type === 'machine.destroyed' && (event.data as { machine: { id: string } }).machine.id === doomed.id));

    await first.start();
    await eventually(async () => ((await state(first.name)) === 'active' ? true : undefined), 60_000, 'the host active again');
    // The destroyed one's container goes once the host answers; the machine stays destroyed.
    await eventually(async () => (!(await containersOn(first)).includes(doomed.id) ? true : undefined), 60_000, 'the destroyed machine’s container removed');
    assert.equal((await owner.call('GET', `/api/machines/${doomed.id}`)).json().status, 'destroyed');
    assert.ok((await containersOn(first)).includes(kept.id), 'the other machine’s container stays');
    // Its machines as they really are now (the engine stops what ran when it restarts without live restore), with the matching event.
    const back = await eventually(async () => {
      const now = await machinesOn(first.name);
      return now.every((machine) => machine.status === 'running' || machine.status === 'stopped') ? now : undefined;
    }, 60_000, 'the machines of the host back in their real state');
    const later = await eventsOf(ctx, owner);
    for (const machine of back) {
      const type = machine.status === 'running' ? 'machine.started' : 'machine.stopped';
      const event = later.find((candidate) => candidate.type === type && (candidate.data as { machine: { id: string } }).machine.id === machine.id);
      assert.equal((event?.data as { detail?: { reason?: string } } | undefined)?.detail?.reason, machine.status === 'running' ? 'host-back' : 'platform', JSON.stringify(event));
    }
  });
});
