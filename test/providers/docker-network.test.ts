import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { containerName, hostnameOf } from '../../src/providers/docker/container-spec.ts';
import type { DnsServer } from '../support/dns-server.ts';
import { TEST_NAMESERVER, dockerUnavailable, startTestNameserver, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { newOwner, type Owner } from '../support/machines.ts';

const skip = await dockerUnavailable();

/** Asks a nameserver directly from inside the machine (not through its resolver): `answered` or `timeout`. */
const askDirectly = (name: string) => `python3 - <<'EOF'
import socket
query = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00' + b''.join(bytes([len(p)]) + p.encode() for p in '${name}'.split('.')) + b'\\x00\\x00\\x01\\x00\\x01'
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(query, ('${TEST_NAMESERVER}', 53))
try:
    s.recvfrom(512)
    print('answered')
except socket.timeout:
    print('timeout')
EOF`;

/** Connects from inside the machine: `connected`, `refused` or `timeout`. */
const connectFrom = (host: string, port: number) => `python3 - <<'EOF'
import socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(('${host}', ${port}))
    print('connected')
except ConnectionRefusedError:
    print('refused')
except (socket.timeout, OSError):
    print('timeout')
EOF`;

/**
 * Issue 38, points 1 and 5, on a real Docker engine. The host's resolver is a
 * private address (as on most clouds); here the test's own nameserver plays
 * it, on a private address of the loopback interface, named by
 * MACHINE_DNS_SERVERS. Machines resolve public names through the service's
 * resolver, reach no other private address (not even that nameserver), and
 * learn nothing of other machines' names.
 */
describe('names in real machines', { skip, timeout: 600_000 }, () => {
  let app: DockerApp;
  let owner: Owner;
  let nameserver: DnsServer;
  let listener: Server;
  let connections = 0;

  before(async () => {
    nameserver = await startTestNameserver((name) => (name === 'pypi.example.test' ? { a: ['203.0.113.7'], ttl: 60 } : 'nxdomain'));
    listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(8053, TEST_NAMESERVER, resolve));
    app = await startDockerApp();
    owner = app.owner;
  });
  after(async () => {
    await app?.close();
    await nameserver?.close();
    await new Promise((resolve) => listener?.close(resolve));
  });

  async function runningMachine(who: Owner, name: string): Promise<string> {
    const created = await who.call('POST', '/api/machines', { name });
    assert.equal(created.statusCode, 201, created.body);
    await untilStatus(who, created.json().id, 'running');
    return created.json().id;
  }

  test('with egress on, a public name resolves through the resolver; the private nameserver itself is out of reach', async () => {
    const machine = await runningMachine(owner, 'resolver-user');
    const lookup = await runToEnd(owner, machine, { command: 'getent hosts pypi.example.test' });
    assert.equal(lookup.exitCode, 0, `${lookup.output}`);
    assert.match(String(lookup.stdout), /^203\.0\.113\.7\s+pypi\.example\.test$/m);
    assert.ok(nameserver.questions.includes('A pypi.example.test'), `forwarded: ${nameserver.questions.join(', ')}`);
    const resolvConf = await runToEnd(owner, machine, { command: 'cat /etc/resolv.conf' });
    assert.doesNotMatch(String(resolvConf.stdout), /127\.0\.0\.11/, "never the engine's resolver, which knows other containers");

    const direct = await runToEnd(owner, machine, { command: askDirectly('direct.example.test') });
    assert.equal(direct.stdout, 'timeout\n', 'a question sent straight to the private nameserver gets nowhere');
    assert.ok(!nameserver.questions.some((question) => question.includes('direct.example.test')), 'and never arrives');
    const tcp = await runToEnd(owner, machine, { command: connectFrom(TEST_NAMESERVER, 8053) });
    assert.equal(tcp.stdout, 'timeout\n', 'no other port of that private address either');
    assert.equal(connections, 0);
  });

  test("a machine finds nothing about another account's machine: not its name, its host name or its container's", async () => {
    const theirs = await runningMachine(owner, 'private-project-name');
    const other = await newOwner(app.ctx);
    const mine = await runningMachine(other, 'nosy');
    for (const name of ['private-project-name', hostnameOf(theirs), containerName(theirs)]) {
      const lookup = await runToEnd(other, mine, { command: `getent hosts ${name}` });
      assert.equal(lookup.exitCode, 2, `${name} resolved to ${lookup.stdout}`);
    }
    assert.equal((await runToEnd(owner, theirs, { command: 'hostname' })).stdout, `${hostnameOf(theirs)}\n`, 'its host name says nothing its owner chose');
  });

  test('with egress off, nothing resolves and no question leaves the machine', async () => {
    const offline = await startDockerApp({ env: { MACHINE_EGRESS: 'off' } });
    try {
      const machine = await runningMachine(offline.owner, 'offline');
      const lookup = await runToEnd(offline.owner, machine, { command: 'getent hosts pypi.example.test' });
      assert.equal(lookup.exitCode, 2, `${lookup.output}`);
      const asked = nameserver.questions.length;
      await runToEnd(offline.owner, machine, { command: 'getent hosts offline-only.example.test' });
      assert.equal(nameserver.questions.length, asked);
      assert.ok(!nameserver.questions.some((question) => question.includes('offline-only')));
    } finally {
      await offline.close();
    }
  });
});
