import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { containerName } from '../../src/providers/docker/container-spec.ts';
import { egressGateway } from '../../src/providers/docker/resolver.ts';
import type { DnsServer } from '../support/dns-server.ts';
import { TEST_NAMESERVER, TEST_SERVERS_NETWORK, dockerUnavailable, ensureTestServersNetwork, startTestNameserver, engine, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import type { Owner } from '../support/machines.ts';

const skip = await dockerUnavailable();

/** Connects from inside the machine and reads what the server says: `hello`, or `timeout` when the way is shut. */
const connectFrom = (host: string) => `python3 - <<'EOF'
import socket
s = socket.socket()
s.settimeout(2)
try:
    s.connect(('${host}', 8080))
    print(s.recv(100).decode().strip())
except (socket.timeout, OSError) as e:
    print('timeout' if isinstance(e, socket.timeout) else 'error: ' + str(e))
EOF`;

/**
 * Issue 41's egress policy on a real engine. The test's own server is a
 * container on the test servers' network (a private range, opened by
 * MACHINE_PRIVATE_ALLOW as an operator would: DOCKER_TEST_ENV), and the test's own nameserver
 * (TEST_NAMESERVER, the resolver's upstream) answers two names with its
 * address: one a machine may resolve, one it may not.
 */
describe('network policies of real machines', { skip, timeout: 600_000 }, () => {
  let app: DockerApp;
  let owner: Owner;
  let nameserver: DnsServer;
  let serverAddress: string;
  const serverName = `machine-platform-egress-test-${randomBytes(4).toString('hex')}`;

  before(async () => {
    const docker = engine();
    const server = await docker.createContainer({
      name: serverName,
      Image: DEFAULT_MACHINE_IMAGE,
      Entrypoint: [],
      Cmd: ['python3', '-c', "import socketserver\nclass H(socketserver.BaseRequestHandler):\n    def handle(self): self.request.sendall(b'hello\\n')\nsocketserver.ThreadingTCPServer(('0.0.0.0', 8080), H).serve_forever()"],
      Labels: { 'machine-platform.test': 'egress-server' },
      HostConfig: { NetworkMode: await ensureTestServersNetwork(), CapDrop: ['ALL'] },
    });
    await server.start();
    serverAddress = (await server.inspect()).NetworkSettings.Networks[TEST_SERVERS_NETWORK.name]!.IPAddress;
    assert.match(serverAddress, /^\d+\.\d+\.\d+\.\d+$/);
    nameserver = await startTestNameserver((name) => (name.endsWith('.egress.test') ? { a: [serverAddress], ttl: 30 } : 'nxdomain'));
    app = await startDockerApp();
    owner = app.owner;
  });
  after(async () => {
    await app?.close();
    await nameserver?.close();
    await engine().getContainer(serverName).remove({ force: true }).catch(() => {});
  });

  async function runningMachine(network: Record<string, unknown> | undefined): Promise<string> {
    const created = await owner.call('POST', '/api/machines', { name: 'egress', ...(network ? { network } : {}) });
    assert.equal(created.statusCode, 201, created.body);
    await untilStatus(owner, created.json().id, 'running');
    return created.json().id;
  }

  const output = async (machine: string, command: string) => String((await runToEnd(owner, machine, { command })).stdout).trim();

  test('an allow list of one domain lets that name resolve and connect, and refuses another name', async () => {
    const machine = await runningMachine({ internet: false, allow: ['allowed.egress.test'] });
    assert.equal((await owner.call('GET', `/api/machines/${machine}`)).json().network.allow[0], 'allowed.egress.test');
    const lookup = await runToEnd(owner, machine, { command: 'getent hosts allowed.egress.test' });
    assert.equal(lookup.exitCode, 0, lookup.output ?? '');
    assert.match(String(lookup.stdout), new RegExp(`^${serverAddress.replaceAll('.', '\\.')}\\s+allowed\\.egress\\.test$`, 'm'));
    assert.equal(await output(machine, connectFrom('allowed.egress.test')), 'hello');

    const asked = nameserver.questions.length;
    const other = await runToEnd(owner, machine, { command: 'getent hosts other.egress.test' });
    assert.equal(other.exitCode, 2, `another name resolved: ${other.stdout}`);
    assert.ok(!nameserver.questions.slice(asked).some((question) => question.includes('other.egress.test')), 'and was never asked upstream');
  });

  test('a CIDR deny refuses an address; a change on the running machine holds at once, without a restart; internet false cuts the way out', async () => {
    const machine = await runningMachine({ internet: true, deny: [`${serverAddress}/32`] });
    const startedAt = (await engine().getContainer(containerName(machine)).inspect()).State.StartedAt;
    assert.equal(await output(machine, connectFrom(serverAddress)), 'timeout');

    const opened = await owner.call('PATCH', `/api/machines/${machine}`, { network: { internet: true } });
    assert.equal(opened.statusCode, 200, opened.body);
    assert.deepEqual(opened.json().network, { internet: true, allow: [], deny: [] });
    assert.equal(await output(machine, connectFrom(serverAddress)), 'hello');

    const shut = await owner.call('PATCH', `/api/machines/${machine}`, { network: { internet: false } });
    assert.equal(shut.statusCode, 200, shut.body);
    assert.equal(await output(machine, connectFrom(serverAddress)), 'timeout');
    assert.notEqual((await runToEnd(owner, machine, { command: 'getent hosts allowed.egress.test' })).exitCode, 0, 'and no name resolves');

    const byCidr = await owner.call('PATCH', `/api/machines/${machine}`, { network: { internet: false, allow: [`${serverAddress}/32`] } });
    assert.equal(byCidr.statusCode, 200, byCidr.body);
    assert.equal(await output(machine, connectFrom(serverAddress)), 'hello', 'an allowed CIDR is reachable with the internet shut');

    const bad = await owner.call('PATCH', `/api/machines/${machine}`, { network: { internet: false, allow: ['not a name'] } });
    assert.equal(bad.statusCode, 400, bad.body);
    assert.deepEqual((await owner.call('GET', `/api/machines/${machine}`)).json().network.allow, [`${serverAddress}/32`], 'a bad entry changes nothing');
    assert.equal(await output(machine, connectFrom(serverAddress)), 'hello');

    assert.equal((await engine().getContainer(containerName(machine)).inspect()).State.StartedAt, startedAt, 'never restarted');
  });

  test('private addresses the operator did not open stay out of reach whatever the policy says', async () => {
    const machine = await runningMachine({ internet: false, allow: ['10.213.53.53/32', '172.16.0.0/12'] });
    assert.equal(await output(machine, connectFrom(TEST_NAMESERVER)), 'timeout');
    const gateway = await egressGateway(engine());
    assert.equal(await output(machine, connectFrom(gateway)), 'timeout', "the engine host's own address");
  });
});
