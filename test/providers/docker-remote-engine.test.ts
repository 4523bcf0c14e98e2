import { strict as assert } from 'node:assert';
import { connect, createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { dockerSuite, dockerUnavailable, runningDockerMachine, runToEnd } from '../support/docker.ts';

const skip = await dockerUnavailable();

/**
 * An engine on another host (CONTRACT 18): the service reaches it only over
 * DOCKER_HOST=tcp://…, so nothing of the service's own disk is in reach. Here
 * a relay on 127.0.0.1 stands for that host's TCP endpoint. The agent gets
 * into the machine through the engine's API, and the machine's agent is
 * reached through the engine's exec over the same connection.
 */
describe('machines on an engine reached over TCP', { skip, timeout: 300_000 }, () => {
  let relay: Server;
  let relayed = 0;
  const socket = process.env.DOCKER_HOST?.startsWith('unix://') ? process.env.DOCKER_HOST.slice('unix://'.length) : '/var/run/docker.sock';

  before(async () => {
    relay = createServer((client) => {
      relayed++;
      const engine = connect(socket);
      client.pipe(engine).pipe(client);
      const end = () => (client.destroy(), engine.destroy());
      client.on('error', end).on('close', end);
      engine.on('error', end).on('close', end);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    // This file runs in a process of its own: every engine client in it (the provider's, the tests') goes over TCP.
    process.env.DOCKER_HOST = `tcp://127.0.0.1:${(relay.address() as { port: number }).port}`;
  });
  const suite = dockerSuite();
  after(() => relay?.close());

  test('a machine runs commands, and its files and processes work', async () => {
    const { owner } = suite;
    const { id } = await runningDockerMachine(owner, { name: 'far-away' });
    const run = await runToEnd(owner, id, { command: 'echo "$(hostname) here"; readlink /opt/machine-platform/agent' });
    assert.equal(run.status, 'succeeded', run.output ?? '');
    assert.match(run.stdout ?? '', /here\nagent-[0-9a-f]{16}\n$/);
    assert.equal((await owner.call('PUT', `/api/machines/${id}/files?path=/root/far.txt`, 'hello')).statusCode, 204);
    const started = await owner.call('POST', `/api/machines/${id}/processes`, { command: 'cat /root/far.txt' });
    const output = (await owner.call('GET', `/api/machines/${id}/processes/${started.json().id}/output?waitMs=5000`)).json();
    assert.equal(output.stdout, 'hello');
    assert.ok(relayed > 0, 'the engine was reached through the relay');
  });
});
