import { strict as assert } from 'node:assert';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { SERVICE_VERSION } from '../../src/config.ts';
import { asBearer } from '../support/app.ts';
import { dockerUnavailable, engine, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();
/** An image of the operator's, offered by name (scripts/busybox-image.sh; docker-any-image.test.ts builds it when absent). */
const BUSYBOX_IMAGE = `machine-platform/busybox:${SERVICE_VERSION}`;

/** A value no test text holds: finding it anywhere but in the machine is a leak. */
const SECRET = `s3cr3t-${randomBytes(12).toString('hex')}`;
const SECRET_SHA = createHash('sha256').update(SECRET).digest('hex');
/** What a command in the machine prints of the variable: its hash, so that answers carrying the output never carry the value. */
const PRINT_HASH = 'printf %s "$MP_TOKEN" | sha256sum';

/**
 * A machine's environment (issue 41) on a real Docker machine: given at
 * create, it reaches runs, background processes and the terminal, and its
 * value is in no API answer, log line, event or database column.
 */
describe('a machine’s environment, on a Docker machine', { skip, timeout: 600_000 }, () => {
  let docker: DockerApp;
  const logs: string[] = [];
  let machineId = '';
  let port = 0;

  before(async () => {
    docker = await startDockerApp({ logs, env: { LOG_LEVEL: 'debug', MACHINE_IMAGES: `tiny=${BUSYBOX_IMAGE}` } });
    await docker.ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (docker.ctx.app.server.address() as AddressInfo).port;
    const created = await docker.owner.call('POST', '/api/machines', { name: 'env-box', env: { MP_TOKEN: SECRET, EMPTY_ONE: '', PATH_EXTRA: 'a=b c' } });
    assert.equal(created.statusCode, 201, created.body);
    machineId = created.json().id;
    assert.deepEqual(created.json().envNames, ['MP_TOKEN', 'EMPTY_ONE', 'PATH_EXTRA']);
    await untilStatus(docker.owner, machineId, 'running', 120_000);
  });
  after(() => docker?.close());

  test('a run sees it, and a run’s own env still wins for that run', async () => {
    const run = await runToEnd(docker.owner, machineId, { command: `${PRINT_HASH}; echo "[$EMPTY_ONE] $PATH_EXTRA"` });
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.match(run.stdout!, new RegExp(`^${SECRET_SHA}  -\\n\\[\\] a=b c\\n$`));
    const overridden = await runToEnd(docker.owner, machineId, { command: 'echo "$MP_TOKEN"', env: { MP_TOKEN: 'for-this-run' } });
    assert.equal(overridden.stdout, 'for-this-run\n');
  });

  test('a background process sees it', async () => {
    const started = await docker.owner.call('POST', `/api/machines/${machineId}/processes`, { command: PRINT_HASH });
    assert.equal(started.statusCode, 201, started.body);
    const output = await eventually(async () => {
      const read = (await docker.owner.call('GET', `/api/machines/${machineId}/processes/${started.json().id}/output?waitMs=1000`)).json();
      return read.running ? undefined : read;
    }, 60_000, 'the process ended');
    assert.equal(output.stdout, `${SECRET_SHA}  -\n`);
  });

  test('the terminal’s login shell sees it', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/machines/${machineId}/terminal`, { headers: asBearer(docker.owner.key) } as unknown as string[]);
    socket.binaryType = 'arraybuffer';
    let output = '';
    // Typing waits for the service's first text frame (the terminal's id): the PTY is there from then on.
    const ready = new Promise((resolve) => socket.addEventListener('message', (event) => { if (typeof event.data === 'string') resolve(true); }));
    socket.addEventListener('message', (event) => {
      if (typeof event.data !== 'string') output += Buffer.from(event.data as ArrayBuffer).toString('utf8');
    });
    await ready;
    socket.send(new TextEncoder().encode(`${PRINT_HASH}\r`));
    await eventually(async () => (output.includes(`${SECRET_SHA}  -`) ? true : undefined), 30_000, 'the hash in the terminal');
    socket.close();
  });

  test('the value is in no answer, log line, event, delivery or database column, and the container holds it', async () => {
    const answers = [
      (await docker.owner.call('GET', `/api/machines/${machineId}`)).body,
      (await docker.owner.call('GET', '/api/machines')).body,
      (await docker.owner.call('GET', '/api/events?limit=100')).body,
    ];
    for (const body of [...answers, ...docker.ctx.responses]) assert.ok(!body.includes(SECRET), 'an answer holds the value');
    assert.ok(logs.length > 0, 'logs were captured');
    for (const line of logs) assert.ok(!line.includes(SECRET), `a log line holds the value: ${line.slice(0, 200)}`);
    assert.ok(JSON.parse(answers[0]!).envNames.includes('MP_TOKEN'));
    const { db } = docker.ctx.app.deps;
    for (const table of ['machines', 'events', 'deliveries', 'runs'] as const) {
      const rows = await db.selectFrom(table).selectAll().execute();
      assert.ok(!JSON.stringify(rows).includes(SECRET), `the ${table} table holds the value`);
    }
    const sealed = await db.selectFrom('machines').select('env_sealed').where('id', '=', machineId).executeTakeFirstOrThrow();
    assert.match(sealed.env_sealed!, /^v1\./);
    const info = await engine().getContainer(`machine-platform-${machineId}`).inspect();
    assert.ok(info.Config.Env.includes(`MP_TOKEN=${SECRET}`));
    assert.ok(info.Config.Env.includes('DISPLAY=:1'));
  });

  test('a machine from an image the operator offers runs that image; one from no image, the base image', async () => {
    const images = await docker.owner.call('GET', '/api/images');
    assert.deepEqual(images.json(), { data: [{ name: 'default', default: true }, { name: 'tiny', default: false }] });
    const created = await docker.owner.call('POST', '/api/machines', { name: 'tiny-box', image: 'tiny' });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().image, 'tiny');
    await untilStatus(docker.owner, created.json().id, 'running', 120_000);
    assert.equal((await engine().getContainer(`machine-platform-${created.json().id}`).inspect()).Config.Image, BUSYBOX_IMAGE);
    const base = await engine().getContainer(`machine-platform-${machineId}`).inspect();
    assert.equal(base.Config.Image, docker.ctx.config.machines.image);
  });

  test('an image MACHINE_IMAGES names that is not on the engine stops the start-up, naming it', async () => {
    await assert.rejects(
      startDockerApp({ env: { MACHINE_IMAGES: 'ghost=machine-platform/no-such-image:0' } }),
      /^ConfigError: MACHINE_IMAGES: machine-platform\/no-such-image:0 \(the image "ghost"\) is not on the Docker engine/,
    );
  });
});
