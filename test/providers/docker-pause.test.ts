import { strict as assert } from 'node:assert';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { containerName } from '../../src/providers/docker/container-spec.ts';
import { pauseMachine as pauseContainer } from '../../src/providers/docker/lifecycle.ts';
import { dockerSuite, dockerUnavailable, engine, untilStatus } from '../support/docker.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();

/** A counter that lives in the shell's memory: each 0.2 s the next number, in a file and appended to a log. */
const COUNTER = 'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; echo $i >> /tmp/counter.log; sleep 0.2; done';

/** A file of the container as the engine reads it from its disk: works on a paused container, where an exec would not. */
async function engineRead(machineId: string, path: string): Promise<string> {
  const archive = await engine().getContainer(containerName(machineId)).getArchive({ path });
  const chunks: Buffer[] = [];
  for await (const chunk of archive as AsyncIterable<Buffer>) chunks.push(chunk);
  const tar = Buffer.concat(chunks);
  // One file: a 512-byte header (its size in octal at 124), then its bytes.
  const size = parseInt(tar.subarray(124, 136).toString('latin1').replace(/\0.*$/, '').trim(), 8);
  return tar.subarray(512, 512 + size).toString('utf8');
}

/**
 * CONTRACT 20 against a real Docker engine: a pause freezes the machine with
 * its memory and processes (the engine's pause), a resume lets them go on
 * from where they were; a paused machine stops and is destroyed as any other,
 * and the engine's own pause and unpause (an operator's) are recorded too.
 */
describe('pause and resume on a real Docker engine', { skip, timeout: 600_000 }, () => {
  const suite = dockerSuite();

  const statusIs = (id: string, status: string) => untilStatus(suite.owner, id, status);
  const counterOf = async (id: string) => Number((await engineRead(id, '/tmp/counter')).trim());

  test('a counting process stands still while paused and counts on from its last value after resume; tools refuse meanwhile', async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'counter' });
    assert.equal(created.statusCode, 201, created.body);
    const machine = created.json() as { id: string };
    await statusIs(machine.id, 'running');
    const started = await suite.owner.call('POST', `/api/machines/${machine.id}/processes`, { command: COUNTER });
    assert.equal(started.statusCode, 201, started.body);
    await eventually(async () => ((await counterOf(machine.id).catch(() => 0)) >= 3 ? true : undefined), 30_000, 'the counter counting');

    const paused = await suite.owner.call('POST', `/api/machines/${machine.id}/pause`);
    assert.equal(paused.statusCode, 200, paused.body);
    assert.equal(paused.json().status, 'paused');
    const info = await engine().getContainer(containerName(machine.id)).inspect();
    assert.deepEqual([info.State.Running, info.State.Paused], [true, true], 'the engine froze the container');

    const frozenAt = await counterOf(machine.id);
    // Five of the counter's ticks: a running counter would have moved.
    await delay(1000);
    assert.equal(await counterOf(machine.id), frozenAt, 'nothing counts while paused');

    // Whatever would reach the frozen agent is refused first, naming the way out; nothing hangs.
    const run = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'true' });
    assert.equal(run.statusCode, 409);
    assert.equal(run.json().code, 'invalid_state');
    assert.match(run.json().detail, /resume/i);
    const files = await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=/tmp/counter`);
    assert.equal(files.statusCode, 409);
    assert.match(files.json().detail, /resume/i);
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 409, 'paused already');

    const resumed = await suite.owner.call('POST', `/api/machines/${machine.id}/resume`);
    assert.equal(resumed.statusCode, 200, resumed.body);
    assert.equal(resumed.json().status, 'running');
    await eventually(async () => ((await counterOf(machine.id)) > frozenAt + 2 ? true : undefined), 30_000, 'the counter counting again');
    const log = (await engineRead(machine.id, '/tmp/counter.log')).trim().split('\n').map(Number);
    assert.deepEqual(log, log.map((_, index) => index + 1), 'one count, from 1 on without a gap or a restart: the process kept its memory');
    assert.ok(log.length > frozenAt + 2);

    // The machine's tools answer again once it runs.
    const read = await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=/tmp/counter`);
    assert.equal(read.statusCode, 200);
  });

  test("the engine's own pause and unpause are recorded (machine.paused, machine.resumed); a paused machine stops and is destroyed", async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'operator' });
    const machine = created.json() as { id: string };
    await statusIs(machine.id, 'running');
    const container = engine().getContainer(containerName(machine.id));

    // Well within the 60 s safety check: the engine's events (pause, unpause) bring the check forward. The
    // operator's pause goes straight to the engine, tried again as runc's freezer may miss a just-booted init's forks.
    await pauseContainer(engine(), machine.id);
    await untilStatus(suite.owner, machine.id, 'paused', 20_000);
    await container.unpause();
    await untilStatus(suite.owner, machine.id, 'running', 20_000);
    const events = (await suite.owner.call('GET', '/api/events?limit=100')).json() as { data: Array<{ type: string; data: { machine: { id: string; status: string } } }> };
    const mine = events.data.filter((event) => event.data.machine?.id === machine.id).map((event) => [event.type, event.data.machine.status]);
    assert.deepEqual(mine.slice(0, 2), [['machine.resumed', 'running'], ['machine.paused', 'paused']]);

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    const stopped = await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    assert.equal(stopped.statusCode, 200, stopped.body);
    assert.equal(stopped.json().status, 'stopped');
    assert.equal((await container.inspect()).State.Running, false);

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
    await statusIs(machine.id, 'running');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    const destroyed = await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assert.equal(destroyed.statusCode, 200, destroyed.body);
    assert.equal(destroyed.json().status, 'destroyed');
    await assert.rejects(container.inspect(), (error: { statusCode?: number }) => error.statusCode === 404);
  });
});
