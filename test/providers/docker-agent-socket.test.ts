import { strict as assert } from 'node:assert';
import { rm } from 'node:fs/promises';
import http2 from 'node:http2';
import { after, before, describe, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { agentConnections } from '../../src/providers/docker/agent-connection.ts';
import { containerName } from '../../src/providers/docker/container-spec.ts';
import { dockerSuite, dockerUnavailable, engine, runningDockerMachine, runToEnd } from '../support/docker.ts';

const skip = await dockerUnavailable();

/** A command through the engine's own exec, beside the agent. */
async function engineRun(machineId: string, cmd: string[]): Promise<void> {
  const exec = await engine().getContainer(containerName(machineId)).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: 'root' });
  const stream = await exec.start({ hijack: true, stdin: false });
  stream.resume();
  await new Promise((resolve) => stream.once('end', resolve));
}

/** How many `agent attach` processes run in the machine (each is an engine exec joined to the agent). */
const ATTACHES = `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^/opt/machine-platform/agent attach' || true`;

/**
 * With the engine on this host, the service reaches a machine's agent on its
 * socket through /proc/<pid>/root (agent/API.md, "Reaching the agent"). The
 * host follows links there, and a machine's root can make one: the agent
 * must then name the machine, or the service asks nothing more of that
 * socket and goes through the engine instead.
 */
describe('the machine agent reached on its socket from the host', { skip, timeout: 300_000 }, () => {
  const suite = dockerSuite();
  const trapPath = `/tmp/agent-trap-${process.pid}.sock`;
  const trapped: string[] = [];
  // Another machine's agent, as far as anyone can tell: it answers health, naming another machine.
  const trap = http2.createServer((request, response) => {
    trapped.push(request.url);
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ version: '1.0.0', api: 1, bootId: '1', hostname: 'another-machine', pid: 1, startedAt: 0 }));
  });

  before(async () => {
    await rm(trapPath, { force: true });
    await new Promise<void>((resolve) => trap.listen(trapPath, resolve));
  });
  after(async () => {
    await new Promise((resolve) => trap.close(resolve));
    await rm(trapPath, { force: true });
  });

  test('no engine exec while the socket is the agent\'s; a socket linked to another agent is asked its health alone, then the engine is used', async () => {
    const { owner } = suite;
    const { id } = await runningDockerMachine(owner, { name: 'socket-from-host' });

    const first = await runToEnd(owner, id, { command: `echo served; ${ATTACHES}` });
    assert.equal(first.stdout, 'served\n0\n', 'the service\'s connection is the socket itself: no `agent attach` in the machine');

    // The machine's root moves the agent's socket and links its name to an absolute path. Inside the machine that
    // path leads back to the agent; on the host, which resolves it from its own root, it is the trap.
    await engineRun(id, ['/bin/sh', '-c', [
      'cd /run/machine-platform',
      'mv agent.sock real.sock',
      `ln -s /run/machine-platform/real.sock ${trapPath}`,
      `ln -s ${trapPath} agent.sock`,
    ].join(' && ')]);

    // A new service process's connections.
    const warnings: string[] = [];
    const logger = { warn: (_details: unknown, message: string) => void warnings.push(message) } as unknown as FastifyBaseLogger;
    const agents = agentConnections(() => engine().getContainer(containerName(id)), logger);
    const client = await agents.of({ id });
    try {
      const result = await client.run({ id: 'run_after_the_link', command: `echo through the engine; ${ATTACHES}`, cwd: null, env: {}, timeoutMs: 10_000 }, AbortSignal.timeout(30_000));
      assert.equal(result?.stdout, 'through the engine\n1\n', 'the machine\'s own agent answered, through an engine exec');
    } finally {
      client.close();
    }
    assert.deepEqual(trapped, ['/v1/health'], 'the other socket was asked who it is, and nothing else');
    assert.equal(warnings.length, 1, warnings.join('\n'));
  });
});
