import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { asSession } from '../support/app.ts';
import { createMachine } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';
import { dockerUnavailable, engine, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';

const skip = await dockerUnavailable();

/**
 * MACHINE_PROVIDER=auto on a host whose Docker engine answers: real
 * machines. A missing machine image is built on first use (here a stand-in
 * for `npm run machine-image` that tags the base image under a new name)
 * while the service answers; machines created meanwhile wait in starting.
 */
describe('MACHINE_PROVIDER=auto with a Docker engine', { skip, timeout: 300_000 }, () => {
  let dir: string;
  const images: string[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'docker-auto-'));
  });
  after(async () => {
    // Only the tags go: the base image they name stays.
    for (const image of images) await engine().getImage(image).remove().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  });

  const hostSeenBy = async (app: DockerApp) =>
    (await app.ctx.app.inject({ method: 'GET', url: '/api/dashboard/machines', headers: asSession(app.owner.user.session, app.ctx.config.publicUrl) })).json();

  test('the engine answers and the image is there: the docker provider, ready', async () => {
    const app = await startDockerApp({ env: { MACHINE_PROVIDER: 'auto' } });
    try {
      assert.equal(app.ctx.app.machineProvider.name, 'docker');
      assert.deepEqual(await hostSeenBy(app), { provider: 'docker', configured: 'auto', image: 'ready' });
    } finally {
      await app.close();
    }
  });

  test('the image is missing: the service answers while it is built; a machine created meanwhile waits in starting, then runs commands', async () => {
    const image = `machine-platform/auto-test:${randomBytes(4).toString('hex')}`;
    images.push(image);
    // The build goes on until the test opens the gate: the machine is surely created during it.
    const gate = join(dir, 'gate');
    const command = ['bash', '-c', `echo "step 1/2: waiting"; while [ ! -e '${gate}' ]; do sleep 0.1; done; docker tag '${DEFAULT_MACHINE_IMAGE}' '${image}' && echo "Built ${image}"`];
    const logs: string[] = [];
    const app = await startDockerApp({ env: { MACHINE_PROVIDER: 'auto', MACHINE_IMAGE: image }, logs, buildOptions: { machineImageBuild: { image, command } } });
    try {
      assert.equal(app.ctx.app.machineHost.provider, 'docker');
      assert.deepEqual(await hostSeenBy(app), { provider: 'docker', configured: 'auto', image: 'building' });
      assert.ok(logs.some((line) => JSON.parse(line).msg.startsWith(`the machine image ${image} is not on the Docker engine: building it now`)), logs.join('\n'));

      const machine = await createMachine(app.owner, { name: 'waits-for-its-image' });
      assert.equal(machine.status, 'starting');
      // Its first check has come and gone: still starting, nothing on the engine yet.
      await eventually(() => (app.ctx.app.machineHost.image()?.status === 'building' ? true : undefined));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.equal((await app.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'starting');

      await writeFile(gate, '');
      await untilStatus(app.owner, machine.id, 'running', 120_000).catch((error: Error) => assert.fail(`${error.message}; the log:\n${logs.join('\n')}`));
      assert.deepEqual(await hostSeenBy(app), { provider: 'docker', configured: 'auto', image: 'ready' });
      assert.ok(logs.some((line) => JSON.parse(line).msg === `the machine image ${image} is built: machines boot`), logs.join('\n'));
      const run = await runToEnd(app.owner, machine.id, { command: 'echo real' });
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.equal(run.stdout, 'real\n');
    } finally {
      await app.close();
    }
  });

  test('the build fails: one log line says why and how to build it; machines end in error saying so; the dashboard says failed', async () => {
    const image = `machine-platform/auto-test:${randomBytes(4).toString('hex')}`;
    const command = ['bash', '-c', 'echo "Building a Debian root filesystem..."; echo "No image registry reachable and no debootstrap: apt-get install debootstrap" >&2; exit 1'];
    const logs: string[] = [];
    const app = await startDockerApp({ env: { MACHINE_PROVIDER: 'auto', MACHINE_IMAGE: image }, logs, buildOptions: { machineImageBuild: { image, command } } });
    try {
      const machine = await createMachine(app.owner, { name: 'never-boots' });
      await eventually(() => (app.ctx.app.machineHost.image()?.status === 'failed' ? true : undefined), 30_000, 'the build to fail');
      const failures = logs.map((line) => JSON.parse(line)).filter((line) => line.level === 50);
      assert.equal(failures.length, 1, logs.join('\n'));
      assert.match(failures[0].msg, /could not be built \(No image registry reachable and no debootstrap: apt-get install debootstrap\); build it with `npm run machine-image`/);
      assert.deepEqual(await hostSeenBy(app), { provider: 'docker', configured: 'auto', image: 'failed' });

      await untilStatus(app.owner, machine.id, 'error', 60_000);
      const events = (await app.owner.call('GET', '/api/events?type=machine.error&limit=100')).json() as { data: Array<{ data: { machine: { id: string }; detail?: { message?: string } } }> };
      const error = events.data.find((event) => event.data.machine.id === machine.id);
      assert.match(error?.data.detail?.message ?? '', /^The machine image could not be built \(No image registry reachable and no debootstrap: apt-get install debootstrap\)\. The operator can build it with `npm run machine-image`/, JSON.stringify(events));
    } finally {
      await app.close();
    }
  });

  test('ROLE=api builds nothing (its workers do): it waits for the image, and is ready once the image is there', async () => {
    const image = `machine-platform/auto-test:${randomBytes(4).toString('hex')}`;
    images.push(image);
    const marker = join(dir, 'api-built');
    const app = await startDockerApp({ env: { MACHINE_PROVIDER: 'auto', MACHINE_IMAGE: image, ROLE: 'api' }, buildOptions: { machineImageBuild: { image, command: ['bash', '-c', `touch '${marker}'; exit 1`] } } });
    try {
      assert.deepEqual(await hostSeenBy(app), { provider: 'docker', configured: 'auto', image: 'building' });
      const [repo, tag] = image.split(':');
      await engine().getImage(DEFAULT_MACHINE_IMAGE).tag({ repo: repo!, tag: tag! });
      await eventually(async () => ((await hostSeenBy(app)).image === 'ready' ? true : undefined), 60_000, 'the image seen');
      await assert.rejects(stat(marker), 'the API process never ran the build');
    } finally {
      await app.close();
    }
  });
});
