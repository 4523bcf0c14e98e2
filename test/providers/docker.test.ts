import { strict as assert } from 'node:assert';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import { MACHINE_CAPABILITIES, containerName } from '../../src/providers/docker/container-spec.ts';
import { EGRESS_NETWORK } from '../../src/providers/docker/network.ts';
import { AGENT_VOLUME } from '../../src/providers/docker/container-spec.ts';
import { createTestApp } from '../support/app.ts';
import { dockerUnavailable, engine, listeningDockerSuite, runningDockerMachine, runToEnd, untilStatus } from '../support/docker.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';

const skip = await dockerUnavailable();

/** Sizes for these tests: `tiny` runs out of memory and processes quickly. */
const SIZES = { MACHINE_SIZES: 'small=1/1g/512,tiny=0.5/96m/64', MACHINE_PRICES: 'small=0.05,tiny=0.01' };

/**
 * CONTRACT 15 against a real Docker engine: machines are containers that
 * boot, run commands for real, keep their disk across stops, and end the way
 * the engine says; they are confined (no host, no database, no engine socket,
 * a process limit) whatever runs inside.
 */
describe('machines on a real Docker engine', { skip, timeout: 900_000 }, () => {
  // A file, not memory: a second app (the service restarted) opens the same database.
  const suite = listeningDockerSuite({ sqlitePath: join(mkdtempSync(join(tmpdir(), 'docker-')), 'service.db'), env: SIZES });
  let receiver: Receiver;

  before(async () => {
    receiver = await startReceiver(() => ({ status: 200 }));
  });
  after(() => receiver?.close());

  const machineOf = async (id: string) => (await suite.owner.call('GET', `/api/machines/${id}`)).json();
  const statusIs = (id: string, status: string, timeoutMs?: number) => untilStatus(suite.owner, id, status, timeoutMs);

  const runningMachine = (body: Record<string, unknown> = {}) => runningDockerMachine(suite.owner, { name: 'real', ...body });

  const run = (machineId: string, body: Record<string, unknown>) => runToEnd(suite.owner, machineId, body);

  const eventsOf = async (machineId: string, type: string) => {
    const page = (await suite.owner.call('GET', `/api/events?type=${type}&limit=100`)).json() as { data: Array<{ data: { machine: { id: string }; detail?: Record<string, unknown> } }> };
    return page.data.filter((event) => event.data.machine.id === machineId);
  };

  /** An agent in the machine: the official SDK client on the machine's MCP endpoint, with its machine token. */
  async function agentOf(machine: { id: string; mcpToken: string }) {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`/api/machines/${machine.id}/mcp`, suite.base), { requestInit: { headers: { authorization: `Bearer ${machine.mcpToken}` } } }));
    suite.clients.push(client);
    return async (name: string, args: Record<string, unknown> = {}) => {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      return { ok: result.isError !== true, json: result.structuredContent as Record<string, unknown> & { error?: { status: number; code: string } } };
    };
  }

  test('create → running as a container, labelled with its id; machine.created reaches an HTTPS receiver, signed', async () => {
    const endpoint = (await suite.owner.call('POST', '/api/event-webhooks', { url: receiver.url, events: ['machine.created'] })).json();
    const machine = await runningMachine({ name: 'first-light' });
    const info = await engine().getContainer(containerName(machine.id)).inspect();
    assert.equal(info.State.Running, true);
    assert.equal(info.Config.Labels['machine-platform.machine-id'], machine.id);
    const [request] = await receiver.waitFor(1, 30_000);
    const event = verifyWebhook(request!.body, String(request!.headers['service-signature']), endpoint.secret) as unknown as { type: string; data: { machine: { id: string; status: string } } };
    assert.equal(event.type, 'machine.created');
    assert.deepEqual([event.data.machine.id, event.data.machine.status], [machine.id, 'running']);
  });

  test("a command's stdout, stderr and exit code come back exactly; cwd, env and the timeout are the machine's", async () => {
    const machine = await runningMachine({ name: 'shell' });
    const failed = await run(machine.id, { command: "sh -c 'echo out; echo err >&2; exit 3'" });
    assert.deepEqual(
      { status: failed.status, exitCode: failed.exitCode, stdout: failed.stdout, stderr: failed.stderr, timedOut: failed.timedOut, truncated: failed.truncated },
      { status: 'failed', exitCode: 3, stdout: 'out\n', stderr: 'err\n', timedOut: false, truncated: false },
    );
    // Both, in the order they arrived: two lines written a moment apart to two pipes may arrive either way round.
    assert.ok(['out\nerr\n', 'err\nout\n'].includes(failed.output!), failed.output!);
    const spaced = await run(machine.id, { command: "sh -c 'echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three'" });
    assert.equal(spaced.output, 'one\ntwo\nthree\n', 'output written apart comes in order');
    const uname = await run(machine.id, { command: 'uname -s; id -u; pwd; echo "$GREETING"', env: { GREETING: 'hello there' } });
    assert.deepEqual([uname.status, uname.stdout], ['succeeded', 'Linux\n0\n/root\nhello there\n']);
    assert.equal((await run(machine.id, { command: 'pwd', cwd: '/tmp' })).stdout, '/tmp\n');
    const slow = await run(machine.id, { command: 'echo started; sleep 30', timeoutMs: 1500 });
    assert.deepEqual([slow.status, slow.exitCode, slow.timedOut, slow.stdout], ['failed', null, true, 'started\n']);
    const long = await run(machine.id, { command: 'head -c 3000000 /dev/zero | tr "\\0" x' });
    assert.deepEqual([long.status, long.stdout!.length, long.truncated], ['succeeded', 1024 * 1024, true]);
    const events = (await suite.owner.call('GET', '/api/events?type=run.failed&limit=100')).json().data as Array<{ data: { run: { id: string; output: string } } }>;
    assert.equal(events.find((event) => event.data.run.id === failed.id)?.data.run.output, failed.output);
  });

  test('a file written survives 20 stops and starts byte for byte', async () => {
    const machine = await runningMachine({ name: 'keeper' });
    const written = await run(machine.id, { command: 'head -c 65536 /dev/urandom > /root/keep.bin && sha256sum /root/keep.bin' });
    assert.equal(written.status, 'succeeded', written.output!);
    for (let cycle = 0; cycle < 20; cycle++) {
      assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
      await statusIs(machine.id, 'stopped');
      assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
      await statusIs(machine.id, 'running');
    }
    const read = await run(machine.id, { command: 'sha256sum /root/keep.bin' });
    assert.equal(read.stdout, written.stdout);
    assert.equal((await eventsOf(machine.id, 'machine.started')).length, 20);
  });

  test('the engine killing the container is machine.error (crash); a stop from outside is machine.stopped (platform)', async () => {
    const killed = await runningMachine({ name: 'killed' });
    await engine().getContainer(containerName(killed.id)).kill({ signal: 'SIGKILL' });
    await statusIs(killed.id, 'error');
    const [error] = await eventsOf(killed.id, 'machine.error');
    assert.deepEqual(error!.data.detail, { reason: 'crash', message: 'The machine was killed (SIGKILL).' });

    const stopped = await runningMachine({ name: 'stopped-outside' });
    await engine().getContainer(containerName(stopped.id)).stop({ t: 10 });
    await statusIs(stopped.id, 'stopped');
    const [event] = await eventsOf(stopped.id, 'machine.stopped');
    assert.deepEqual(event!.data.detail, { reason: 'platform' });
    // Started again, it is the same machine.
    assert.equal((await suite.owner.call('POST', `/api/machines/${stopped.id}/start`)).statusCode, 200);
    await statusIs(stopped.id, 'running');
  });

  test('a command out of memory fails its run (137) and the machine goes on; the machine itself out of memory is machine.error saying so', async () => {
    const machine = await runningMachine({ name: 'hungry', size: 'tiny' });
    const greedy = await run(machine.id, { command: 'python3 -c "x = bytearray(512 * 1024 * 1024)"' });
    assert.deepEqual([greedy.status, greedy.exitCode], ['failed', 137]);
    assert.equal((await run(machine.id, { command: 'echo still here' })).stdout, 'still here\n');
    assert.equal((await machineOf(machine.id)).status, 'running');
    // Now the machine's own memory fills up (shared memory, which no process's size shows) and its init is the one the kernel picks.
    const last = await run(machine.id, { command: 'echo 1000 > /proc/1/oom_score_adj; head -c 90m /dev/zero > /dev/shm/fill' });
    assert.deepEqual([last.status, last.exitCode], ['failed', null], 'the machine died under it: it cannot say');
    await statusIs(machine.id, 'error');
    const [error] = await eventsOf(machine.id, 'machine.error');
    assert.equal(error!.data.detail!.reason, 'crash');
    assert.match(String(error!.data.detail!.message), /out of memory/);
  });

  test('files: written, read back byte for byte, listed and deleted, over HTTP and over the machine\'s MCP tools', async () => {
    const machine = await runningMachine({ name: 'filer' });
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) % 256));
    const put = await suite.ctx.app.inject({ method: 'PUT', url: `/api/machines/${machine.id}/files?path=/srv/data/blob.bin`, headers: { authorization: `Bearer ${suite.owner.key}`, 'content-type': 'application/octet-stream' }, payload: bytes });
    assert.equal(put.statusCode, 204, put.body);
    const got = await suite.ctx.app.inject({ method: 'GET', url: `/api/machines/${machine.id}/files?path=/srv/data/blob.bin`, headers: { authorization: `Bearer ${suite.owner.key}` } });
    assert.equal(got.statusCode, 200);
    assert.equal(got.headers['content-type'], 'application/octet-stream');
    assert.ok(got.rawPayload.equals(bytes), 'the same bytes');
    const listing = (await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=/srv/data`)).json();
    assert.deepEqual(listing.entries.map((entry: { name: string; type: string; size: number }) => [entry.name, entry.type, entry.size]), [['blob.bin', 'file', 70_000]]);
    assert.match(listing.entries[0].modifiedAt, /^\d{4}-\d\d-\d\dT/);
    // A JSON file is bytes here, not JSON.
    const json = await suite.ctx.app.inject({ method: 'PUT', url: `/api/machines/${machine.id}/files?path=/srv/data/config.json`, headers: { authorization: `Bearer ${suite.owner.key}`, 'content-type': 'application/json' }, payload: '{"a": 1}' });
    assert.equal(json.statusCode, 204, json.body);
    assert.equal((await run(machine.id, { command: 'cat /srv/data/config.json' })).stdout, '{"a": 1}');

    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=/srv/nothing`)).statusCode, 404);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${machine.id}/files?path=/srv/data`)).json().code, 'invalid_state', 'a directory needs recursive');
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=relative/path`)).statusCode, 400);

    const agent = await agentOf(machine as unknown as { id: string; mcpToken: string });
    assert.deepEqual((await agent('file_write', { path: '/root/notes/today.md', content: 'héllo\n' })).json, { ok: true, path: '/root/notes/today.md', size: 7 });
    assert.deepEqual((await agent('file_write', { path: '/root/notes/today.md', content: 'more\n', append: true })).ok, true);
    assert.equal((await agent('file_read', { path: '/root/notes/today.md' })).json.content, 'héllo\nmore\n');
    assert.equal((await agent('file_read', { path: '/srv/data/blob.bin', encoding: 'base64' })).json.content, bytes.toString('base64'));
    assert.equal((await agent('file_read', { path: '/srv/data/blob.bin' })).json.error?.code, 'invalid_request', 'not UTF-8: base64 says so');
    assert.deepEqual(((await agent('file_list', { path: '/root/notes' })).json.entries as Array<{ name: string }>).map((entry) => entry.name), ['today.md']);
    assert.deepEqual((await agent('file_delete', { path: '/srv/data', recursive: true })).json, { ok: true });
    assert.equal((await agent('file_read', { path: '/srv/data/blob.bin' })).json.error?.status, 404);

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await statusIs(machine.id, 'stopped');
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=/root`)).json().code, 'invalid_state', 'a stopped machine serves no files');
  });

  test('processes: started, output read from an offset (waiting for more), input, signals, listed; they outlive the service, not the machine', async () => {
    const machine = await runningMachine({ name: 'worker' });
    const started = await suite.owner.call('POST', `/api/machines/${machine.id}/processes`, { command: 'echo ready; echo warn >&2; while read line; do echo "got $line"; done; echo bye; exit 5' });
    assert.equal(started.statusCode, 201, started.body);
    const process = started.json();
    assert.match(process.id, /^proc_[0-9a-z]{26}$/);
    assert.deepEqual([process.status, process.exitCode], ['running', null]);
    const first = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${process.id}/output?waitMs=5000`)).json();
    assert.equal(first.running, true);
    const seen = { stdout: first.stdout as string, stderr: first.stderr as string };
    let offset = first.offset as number;
    while (seen.stdout !== 'ready\n' || seen.stderr !== 'warn\n') {
      const more = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${process.id}/output?offset=${offset}&waitMs=5000`)).json();
      seen.stdout += more.stdout;
      seen.stderr += more.stderr;
      offset = more.offset;
    }
    assert.equal(offset, 'ready\nwarn\n'.length, 'the offset counts both streams');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/processes/${process.id}/input`, { data: 'one\ntwo\n' })).statusCode, 204);
    const echoed = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${process.id}/output?offset=${offset}&waitMs=5000`)).json();
    assert.match(echoed.stdout, /^got one\n/);

    const agent = await agentOf(machine as unknown as { id: string; mcpToken: string });
    const sleeper = (await agent('process_start', { command: 'sleep 600', cwd: '/tmp' })).json;
    assert.equal(sleeper.status, 'running');
    assert.deepEqual((await agent('process_signal', { id: sleeper.id, signal: 'TERM' })).json, { ok: true });
    const ended = await eventually(async () => {
      const current = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${sleeper.id}`)).json();
      return current.status === 'exited' ? current : undefined;
    }, 10_000, 'the sleeper to end');
    assert.equal(ended.exitCode, 143);
    assert.equal((await agent('process_signal', { id: sleeper.id, signal: 'KILL' })).json.error?.code, 'invalid_state', 'ended: no signal');
    const listed = (await agent('process_list')).json.data as Array<{ id: string }>;
    assert.deepEqual(listed.map((item) => item.id), [process.id, sleeper.id]);

    // The service restarts (a new app on the same database): the process is still there, still running.
    const restarted = await createTestApp({ realClock: true, database: suite.ctx.database, env: { MACHINE_PROVIDER: 'docker', ...SIZES } });
    try {
      const same = await restarted.app.inject({ method: 'GET', url: `/api/machines/${machine.id}/processes/${process.id}`, headers: { authorization: `Bearer ${suite.owner.key}` } });
      assert.equal(same.json().status, 'running');
    } finally {
      await restarted.close();
    }
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await statusIs(machine.id, 'stopped');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
    await statusIs(machine.id, 'running');
    const after = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${process.id}`)).json();
    assert.deepEqual([after.status, after.exitCode, after.endReason], ['exited', null, 'machine-stopped'], 'the stop ended it, and it says so');
    const output = (await suite.owner.call('GET', `/api/machines/${machine.id}/processes/${process.id}/output`)).json();
    assert.deepEqual([output.running, output.exitCode, output.endReason], [false, null, 'machine-stopped']);
  });

  test('destroy removes the container and its volumes; expiry destroys the machine too', async () => {
    const machine = await runningMachine({ name: 'doomed' });
    // Its own volumes; the agent's volume is every machine's, mounted read-only.
    const volumes = (await engine().getContainer(containerName(machine.id)).inspect()).Mounts.map((mount) => mount.Name).filter((name) => name && name !== AGENT_VOLUME);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${machine.id}`)).statusCode, 200);
    await statusIs(machine.id, 'destroyed');
    await assert.rejects(engine().getContainer(containerName(machine.id)).inspect(), (error: { statusCode?: number }) => error.statusCode === 404);
    for (const volume of volumes) await assert.rejects(engine().getVolume(volume!).inspect());

    // Not waited for as running: on a loaded engine its boot may take longer than its four seconds, and expiry
    // destroys it all the same (waiting for running then waited for what never came).
    const created = await suite.owner.call('POST', '/api/machines', { name: 'short-lived', expiresAt: new Date(Date.now() + 4000).toISOString(), onExpire: 'destroy' });
    assert.equal(created.statusCode, 201, created.body);
    const expiring = created.json();
    await statusIs(expiring.id, 'destroyed', 60_000);
    await assert.rejects(engine().getContainer(containerName(expiring.id)).inspect(), (error: { statusCode?: number }) => error.statusCode === 404);
  });

  test('a machine cannot reach the host (a listener on every address, PostgreSQL) nor the engine, runs with the documented capabilities, and its fork bomb stops at its process limit while another machine answers', async () => {
    let listener: Server | undefined;
    try {
      listener = createServer((socket) => socket.end('host says hi\n'));
      await new Promise<void>((resolve) => listener!.listen(0, '0.0.0.0', resolve));
      const port = (listener.address() as { port: number }).port;
      const bomb = await runningMachine({ name: 'confined', size: 'tiny' });
      const info = await engine().getContainer(containerName(bomb.id)).inspect();
      const gateway = info.NetworkSettings.Networks[EGRESS_NETWORK.name]!.Gateway;
      const connect = (host: string, target: number) =>
        `python3 -c "import socket; s = socket.create_connection(('${host}', ${target}), timeout=3); print(s.recv(100))"`;
      for (const [host, target] of [[gateway, port], [gateway, 5432], ['127.0.0.1', port], ['host.docker.internal', port]] as const) {
        const attempt = await run(bomb.id, { command: connect(host, target) });
        assert.equal(attempt.status, 'failed', `${host}:${target} answered: ${attempt.output}`);
      }
      assert.equal((await run(bomb.id, { command: 'test -e /var/run/docker.sock || test -e /run/docker.sock' })).status, 'failed', 'no engine socket');
      const capabilities = await run(bomb.id, { command: "grep CapEff /proc/self/status | awk '{print $2}'" });
      assert.equal(capabilities.stdout!.trim(), capabilityMask(MACHINE_CAPABILITIES));
      assert.equal(info.HostConfig.Privileged, false);
      assert.deepEqual(info.HostConfig.SecurityOpt, ['no-new-privileges']);

      const other = await runningMachine({ name: 'neighbour' });
      const forkBomb = await run(bomb.id, { command: 'bomb() { bomb | bomb & }; bomb; sleep 5; echo tried', timeoutMs: 20_000 });
      assert.notEqual(forkBomb.status, 'pending');
      const stats = (await engine().getContainer(containerName(bomb.id)).stats({ stream: false })) as { pids_stats?: { current?: number; limit?: number } };
      assert.ok((stats.pids_stats?.current ?? 0) <= 64, `at most its 64 processes: ${JSON.stringify(stats.pids_stats)}`);
      assert.equal((await run(other.id, { command: 'echo fine' })).stdout, 'fine\n', 'the other machine answers');
    } finally {
      listener?.close();
    }
  });
});

/** The effective capability set /proc shows, as hex, for capability names. */
function capabilityMask(names: readonly string[]): string {
  const numbers: Record<string, number> = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, NET_BIND_SERVICE: 10 };
  let mask = 0n;
  for (const name of names) mask |= 1n << BigInt(numbers[name]!);
  return mask.toString(16).padStart(16, '0');
}
