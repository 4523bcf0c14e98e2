import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { before, describe, test } from 'node:test';
import { SERVICE_VERSION } from '../../src/config.ts';
import { containerName } from '../../src/providers/docker/container-spec.ts';
import { dockerSuite, dockerUnavailable, engine, runningDockerMachine, runToEnd } from '../support/docker.ts';

const skip = await dockerUnavailable();
const BUSYBOX_IMAGE = `machine-platform/busybox:${SERVICE_VERSION}`;

/**
 * Machines work on any Linux image (CONTRACT 18): the agent is static and
 * brings what files and processes need. Here the image is nothing but a
 * static BusyBox, with no C library (scripts/busybox-image.sh, built here if
 * missing): commands, files and processes work in it through the API.
 */
/** A command through the engine's own exec, beside the agent. */
async function engineRun(machineId: string, cmd: string[]): Promise<void> {
  const exec = await engine().getContainer(containerName(machineId)).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  stream.resume();
  await new Promise((resolve) => stream.once('end', resolve));
}

describe('machines from an image with nothing but BusyBox', { skip, timeout: 300_000 }, () => {
  before(async () => {
    const present = await engine().getImage(BUSYBOX_IMAGE).inspect().then(() => true, () => false);
    if (!present) execFileSync('bash', ['scripts/busybox-image.sh'], { stdio: 'inherit' });
  });
  const suite = dockerSuite({ env: { MACHINE_IMAGE: BUSYBOX_IMAGE } });

  test('commands, files and processes', async () => {
    const { owner } = suite;
    const { id } = await runningDockerMachine(owner, { name: 'tiny-image' });

    const run = await runToEnd(owner, id, { command: 'echo out; echo err >&2; pwd; ls /lib 2>/dev/null | wc -l; exit 4', env: { A: 'b' } });
    assert.deepEqual([run.status, run.exitCode, run.stdout, run.stderr], ['failed', 4, 'out\n/root\n0\n', 'err\n']);
    const timedOut = await runToEnd(owner, id, { command: 'sleep 30', timeoutMs: 1000 });
    assert.deepEqual([timedOut.status, timedOut.timedOut], ['failed', true]);

    const bytes = Buffer.from(Array.from({ length: 50_000 }, (_, i) => (i * 13) % 256));
    const put = await suite.ctx.app.inject({ method: 'PUT', url: `/api/machines/${id}/files?path=/srv/blob.bin`, headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/octet-stream' }, payload: bytes });
    assert.equal(put.statusCode, 204, put.body);
    const got = await suite.ctx.app.inject({ method: 'GET', url: `/api/machines/${id}/files?path=/srv/blob.bin`, headers: { authorization: `Bearer ${owner.key}` } });
    assert.ok(got.rawPayload.equals(bytes), 'the same bytes');
    const listing = (await owner.call('GET', `/api/machines/${id}/files?path=/srv`)).json();
    assert.deepEqual(listing.entries.map((entry: { name: string; size: number }) => [entry.name, entry.size]), [['blob.bin', 50_000]]);
    assert.equal((await owner.call('DELETE', `/api/machines/${id}/files?path=/srv/blob.bin`)).statusCode, 204);

    const started = await owner.call('POST', `/api/machines/${id}/processes`, { command: 'while read line; do echo "got $line"; done' });
    assert.equal(started.statusCode, 201, started.body);
    const process = started.json();
    assert.equal((await owner.call('POST', `/api/machines/${id}/processes/${process.id}/input`, { data: 'one\n' })).statusCode, 204);
    const output = (await owner.call('GET', `/api/machines/${id}/processes/${process.id}/output?waitMs=5000`)).json();
    assert.equal(output.stdout, 'got one\n');
    assert.equal((await owner.call('POST', `/api/machines/${id}/processes/${process.id}/signal`, { signal: 'KILL' })).statusCode, 204);
    assert.equal((await owner.call('GET', `/api/machines/${id}/screenshot`)).statusCode, 409, 'no display in this image');

    // The agent killed (by the kernel for memory, say): the machine starts it again, and what it supervised is lost, saying so.
    const sleeper = (await owner.call('POST', `/api/machines/${id}/processes`, { command: 'sleep 600' })).json();
    await engineRun(id, ['/bin/sh', '-c', 'for p in /proc/[0-9]*; do case "$(readlink $p/exe)" in /opt/machine-platform/agent-*) kill -9 "${p#/proc/}";; esac; done']);
    const after = await runToEnd(owner, id, { command: 'echo back' });
    assert.equal(after.stdout, 'back\n');
    const lost = (await owner.call('GET', `/api/machines/${id}/processes/${sleeper.id}`)).json();
    assert.deepEqual([lost.status, lost.endReason], ['exited', 'lost']);
  });
});
