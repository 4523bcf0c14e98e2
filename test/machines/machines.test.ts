import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { asBearer, asSession } from '../support/app.ts';
import { assertMachineEvent, BOOT_MS, createMachine, eventCursor, finishBoot, machineSuite, newOwner, runningMachine } from '../support/machines.ts';

const MACHINE_KEYS = ['autoStopMinutes', 'createdAt', 'envNames', 'expiresAt', 'externalId', 'id', 'image', 'labels', 'name', 'network', 'screen', 'size', 'status', 'template'];

describe('machines', () => {
  const suite = machineSuite();

  test('create answers the machine with its token once; machine.created follows when the boot completes', async () => {
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const response = await suite.owner.call('POST', '/api/machines', { name: '  build-box ', size: 'medium', externalId: 'job-42', labels: { team: 'infra', 'app.kubernetes.io/name': 'x' } });
    assert.equal(response.statusCode, 201);
    const machine = response.json();
    assert.deepEqual(Object.keys(machine).sort(), [...MACHINE_KEYS, 'mcpToken'].sort());
    assert.match(machine.id, /^mch_[0-9a-z]{26}$/);
    assert.match(machine.mcpToken, /^tmm_[0-9A-Za-z]{38}$/);
    assert.equal(machine.name, 'build-box');
    assert.equal(machine.status, 'starting');
    assert.equal(machine.size, 'medium');
    assert.equal(machine.externalId, 'job-42');
    assert.deepEqual(machine.labels, { team: 'infra', 'app.kubernetes.io/name': 'x' });
    assert.equal(machine.expiresAt, null);
    assert.equal(machine.createdAt, new Date(suite.ctx.clock.now()).toISOString());

    const read = (await suite.owner.call('GET', `/api/machines/${machine.id}`)).json();
    assert.deepEqual(Object.keys(read).sort(), MACHINE_KEYS, 'the token is never shown again');
    assert.deepEqual(await events(), [], 'nothing is emitted before the boot completes');

    suite.ctx.clock.advance(BOOT_MS - 1);
    await suite.ctx.app.jobs.drain();
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'starting');
    assert.deepEqual(await events(), []);

    suite.ctx.clock.advance(1);
    await suite.ctx.app.jobs.drain();
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');
    const [created, ...rest] = await events();
    assertMachineEvent(created, 'machine.created', machine, 'running', {}, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('defaults: size small, externalId empty, no labels', async () => {
    const machine = await createMachine(suite.owner, { name: 'plain' });
    assert.equal(machine.size, 'small');
    assert.equal(machine.externalId, '');
    assert.deepEqual(machine.labels, {});
    await finishBoot(suite.ctx);
  });

  test('create refuses bad bodies with 400 and creates nothing', async () => {
    const other = await newOwner(suite.ctx);
    const past = new Date(suite.ctx.clock.now() - 1000).toISOString();
    const cases: Array<[string, unknown]> = [
      ['missing name', {}],
      ['blank name', { name: '   ' }],
      ['long name', { name: 'n'.repeat(101) }],
      ['unknown field', { name: 'a', colour: 'red' }],
      ['wrong type', { name: 7 }],
      ['unknown size', { name: 'a', size: 'huge' }],
      ['label value not a string', { name: 'a', labels: { team: 1 } }],
      ['bad label key', { name: 'a', labels: { 'no spaces': 'x' } }],
      ['too many labels', { name: 'a', labels: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }],
      ['long externalId', { name: 'a', externalId: 'x'.repeat(256) }],
      ['expiresAt in the past', { name: 'a', expiresAt: past }],
      ['expiresAt not a timestamp', { name: 'a', expiresAt: 'tomorrow' }],
      ['bad onExpire', { name: 'a', onExpire: 'explode' }],
    ];
    for (const [label, payload] of cases) {
      const response = await other.call('POST', '/api/machines', payload);
      assert.equal(response.statusCode, 400, label);
      assert.equal(response.json().code, 'invalid_request', label);
    }
    const text = await suite.ctx.app.inject({ method: 'POST', url: '/api/machines', headers: { ...asBearer(other.key), 'content-type': 'text/plain' }, payload: 'name=a' });
    assert.equal(text.statusCode, 415);
    assert.deepEqual((await other.call('GET', '/api/machines')).json(), { data: [], nextCursor: null });
  });

  test('regression: names accepted newlines and control characters (they travel into events, stop reasons and logs); they are 400', async () => {
    const other = await newOwner(suite.ctx);
    for (const name of ['build\nbox', 'build\r\nmachine.stopped', 'tab\there', 'bell\u0007', 'esc\u001b[31m', 'del\u007f', 'c1\u0085', 'line\u2028sep']) {
      const response = await other.call('POST', '/api/machines', { name });
      assert.equal(response.statusCode, 400, JSON.stringify(name));
      assert.equal(response.json().code, 'invalid_request');
      assert.equal(response.json().detail, 'name must be one line without control characters.');
      assert.equal((await other.call('POST', '/api/pools', { name, size: 'small', count: 0 })).statusCode, 400, `pool ${JSON.stringify(name)}`);
    }
    assert.deepEqual((await other.call('GET', '/api/machines')).json(), { data: [], nextCursor: null });
    const fine = await other.call('POST', '/api/machines', { name: '  Büro-Maschine №2 (ünïcode) ' });
    assert.equal(fine.statusCode, 201);
    assert.equal(fine.json().name, 'Büro-Maschine №2 (ünïcode)');
    await finishBoot(suite.ctx);
  });

  test('list is newest first, pages with nextCursor and filters by status', async () => {
    const lister = await newOwner(suite.ctx);
    const first = await createMachine(lister, { name: 'm1' });
    const second = await createMachine(lister, { name: 'm2' });
    const third = await createMachine(lister, { name: 'm3' });
    await lister.call('POST', `/api/machines/${first.id}/stop`);

    const page1 = (await lister.call('GET', '/api/machines?limit=2')).json();
    assert.deepEqual(page1.data.map((m: { id: string }) => m.id), [third.id, second.id]);
    assert.equal(page1.nextCursor, second.id);
    const page2 = (await lister.call('GET', `/api/machines?limit=2&cursor=${page1.nextCursor}`)).json();
    assert.deepEqual(page2.data.map((m: { id: string }) => m.id), [first.id]);
    assert.equal(page2.nextCursor, null);

    const stopped = (await lister.call('GET', '/api/machines?status=stopped')).json();
    assert.deepEqual(stopped.data.map((m: { id: string }) => m.id), [first.id]);
    assert.equal((await lister.call('GET', '/api/machines?status=sleeping')).statusCode, 400);
    assert.equal((await lister.call('GET', '/api/machines?limit=0')).statusCode, 400);
    assert.equal((await lister.call('GET', '/api/machines?limit=101')).statusCode, 400);
    await finishBoot(suite.ctx);
  });

  test("another account's machine is 404 on every route, as is an unknown id", async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const stranger = await newOwner(suite.ctx);
    const routes: Array<[string, string, unknown?]> = [
      ['GET', `/api/machines/${machine.id}`],
      ['POST', `/api/machines/${machine.id}/start`],
      ['POST', `/api/machines/${machine.id}/stop`],
      ['DELETE', `/api/machines/${machine.id}`],
      ['POST', `/api/machines/${machine.id}/mcp-token`],
      ['POST', `/api/machines/${machine.id}/runs`, { command: 'ls' }],
      ['GET', `/api/machines/${machine.id}/runs`],
      ['POST', `/api/machines/${machine.id}/live-view`],
      ['POST', '/api/schedules', { machineId: machine.id, name: 's', cron: '* * * * *', command: 'ls' }],
      ['POST', '/api/inbound-webhooks', { machineId: machine.id, name: 'h', command: 'ls' }],
    ];
    for (const [method, url, payload] of routes) {
      const response = await stranger.call(method as 'GET', url, payload);
      assert.equal(response.statusCode, 404, `${method} ${url}`);
      assert.equal(response.json().code, 'not_found');
      const unknown = await suite.owner.call(method as 'GET', url.replace(machine.id, 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz'), payload === undefined ? undefined : { ...(payload as object), ...('machineId' in (payload as object) ? { machineId: 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz' } : {}) });
      assert.equal(unknown.statusCode, 404, `unknown id: ${method} ${url}`);
    }
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running', 'untouched');
  });

  test('stop, start and destroy emit machine.stopped, machine.started and machine.destroyed', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'lifecycle', externalId: 'ext-1', labels: { env: 'test' } });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    const stopped = await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    assert.equal(stopped.statusCode, 200);
    assert.deepEqual(Object.keys(stopped.json()).sort(), MACHINE_KEYS);
    assert.equal(stopped.json().status, 'stopped');
    let [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.stopped', machine, 'stopped', { reason: 'requested' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    const again = await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    assert.equal(again.statusCode, 409);
    assert.equal(again.json().code, 'invalid_state');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'ls' })).statusCode, 409, 'runs need a running machine');

    const started = await suite.owner.call('POST', `/api/machines/${machine.id}/start`);
    assert.equal(started.statusCode, 200);
    assert.equal(started.json().status, 'starting');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 409, 'already starting');
    assert.deepEqual(await events(), [], 'machine.started waits for the boot');
    await finishBoot(suite.ctx);
    [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.started', machine, 'running', {}, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 409, 'already running');

    const destroyed = await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assert.equal(destroyed.statusCode, 200);
    assert.equal(destroyed.json().status, 'destroyed');
    [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.destroyed', machine, 'destroyed', { reason: 'requested' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'destroyed', 'the record stays');
    for (const [method, url] of [['DELETE', ''], ['POST', '/start'], ['POST', '/stop'], ['POST', '/mcp-token'], ['POST', '/live-view']] as const) {
      const response = await suite.owner.call(method, `/api/machines/${machine.id}${url}`);
      assert.equal(response.statusCode, 409, `${method} ${url} on a destroyed machine`);
      assert.equal(response.json().code, 'invalid_state');
    }
    const token = await suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/live-view`, headers: asBearer(machine.mcpToken) });
    assert.equal(token.statusCode, 401, "a destroyed machine's token is dead");
  });

  test('a machine can be stopped while it boots; its boot then never completes', async () => {
    const machine = await createMachine(suite.owner, { name: 'early-stop' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).json().status, 'stopped');
    await finishBoot(suite.ctx);
    const fresh = await events();
    assert.deepEqual(fresh.map((e) => e.type), ['machine.stopped']);
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'stopped');
  });

  test('label simulate=boot-failure: the boot fails with machine.error; a retry fails again', async () => {
    const machine = await createMachine(suite.owner, { name: 'doomed', labels: { simulate: 'boot-failure' } });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    await finishBoot(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'error');
    let [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'boot-failure', message: 'The machine failed to boot.' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).json().status, 'starting');
    await finishBoot(suite.ctx);
    [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'boot-failure', message: 'The machine failed to boot.' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('the host stops or crashes running machines: reason platform, machine.error crash; the label simulate=balance-empty is gone (billing decides that reason)', async () => {
    const platform = await createMachine(suite.owner, { name: 'evicted', labels: { simulate: 'platform-stop' } });
    const broke = await createMachine(suite.owner, { name: 'broke', labels: { simulate: 'balance-empty' } });
    const crash = await createMachine(suite.owner, { name: 'crashy', labels: { simulate: 'crash' } });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    await finishBoot(suite.ctx);
    // Each machine's check is a job of its own: they run side by side, so their events come in any order.
    const booted = (await events()).map((e) => [e.type, (e.data.machine as { id: string }).id]).sort((a, b) => (a[1]! < b[1]! ? -1 : 1));
    assert.deepEqual(booted, [
      ['machine.created', platform.id],
      ['machine.created', broke.id],
      ['machine.created', crash.id],
    ]);
    await finishBoot(suite.ctx);
    const fresh = await events();
    const byMachine = (id: string) => fresh.find((e) => (e.data.machine as { id: string }).id === id);
    assertMachineEvent(byMachine(platform.id), 'machine.stopped', platform, 'stopped', { reason: 'platform' }, suite.ctx.clock.now());
    assertMachineEvent(byMachine(crash.id), 'machine.error', crash, 'error', { reason: 'crash', message: 'The machine crashed.' }, suite.ctx.clock.now());
    assert.equal(byMachine(broke.id), undefined, 'a simulate=balance-empty label no longer stops a machine');
    assert.equal(fresh.length, 2);
    await finishBoot(suite.ctx);
    assert.deepEqual(await events(), [], 'each happens once');
  });

  test('expiry with onExpire stop: machine.expired, then machine.stopped with reason expired', async () => {
    const expiresAt = new Date(suite.ctx.clock.now() + 10 * 60_000).toISOString();
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'short-lived', expiresAt });
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().expiresAt, expiresAt);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    suite.ctx.clock.set(Date.parse(expiresAt) - 1);
    await suite.ctx.app.jobs.drain();
    assert.deepEqual(await events(), []);

    suite.ctx.clock.set(Date.parse(expiresAt));
    await suite.ctx.app.jobs.drain();
    const [expired, stopped, ...rest] = await events();
    assertMachineEvent(expired, 'machine.expired', machine, 'running', { expiresAt, onExpire: 'stop' }, suite.ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'expired' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.ok(expired!.id < stopped!.id, 'ids follow emission order');

    const start = await suite.owner.call('POST', `/api/machines/${machine.id}/start`);
    assert.equal(start.statusCode, 409, 'an expired machine stays off');
    await suite.ctx.app.jobs.drain();
    assert.deepEqual(await events(), [], 'expiry happens once');
  });

  test('expiry with onExpire destroy: machine.expired, then machine.destroyed', async () => {
    const expiresAt = new Date(suite.ctx.clock.now() + 60_000).toISOString();
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'ephemeral', expiresAt, onExpire: 'destroy' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.set(Date.parse(expiresAt) + 5000);
    await suite.ctx.app.jobs.drain();
    const [expired, destroyed, ...rest] = await events();
    assertMachineEvent(expired, 'machine.expired', machine, 'running', { expiresAt, onExpire: 'destroy' }, suite.ctx.clock.now());
    assertMachineEvent(destroyed, 'machine.destroyed', machine, 'destroyed', { reason: 'expired' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'destroyed');
  });

  test('a stopped machine that expires emits machine.expired only', async () => {
    const expiresAt = new Date(suite.ctx.clock.now() + 60_000).toISOString();
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'idle', expiresAt });
    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.set(Date.parse(expiresAt));
    await suite.ctx.app.jobs.drain();
    const [expired, ...rest] = await events();
    assertMachineEvent(expired, 'machine.expired', machine, 'stopped', { expiresAt, onExpire: 'stop' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test("two runs of a machine's check at once (a lease that ran out under a slow process) apply the change once", async () => {
    const machine = await createMachine(suite.owner, { name: 'contended' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.advance(BOOT_MS);
    const { checkMachine } = await import('../../src/machines/machines.jobs.ts');
    await Promise.all([checkMachine(suite.ctx.app.deps, suite.ctx.app.machineProvider, machine.id), checkMachine(suite.ctx.app.deps, suite.ctx.app.machineProvider, machine.id)]);
    const fresh = await events();
    assert.deepEqual(fresh.map((e) => e.type), ['machine.created']);
    assert.equal((fresh[0]!.data.machine as { id: string }).id, machine.id);
  });

  test('a new machine token replaces the old one at once', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'rotating' });
    const rotated = await suite.owner.call('POST', `/api/machines/${machine.id}/mcp-token`);
    assert.equal(rotated.statusCode, 200);
    const body = rotated.json();
    assert.deepEqual(Object.keys(body).sort(), [...MACHINE_KEYS, 'mcpToken'].sort());
    assert.equal(body.id, machine.id);
    assert.match(body.mcpToken, /^tmm_[0-9A-Za-z]{38}$/);
    assert.notEqual(body.mcpToken, machine.mcpToken);
    const liveView = (token: string) => suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/live-view`, headers: asBearer(token) });
    assert.equal((await liveView(machine.mcpToken)).statusCode, 401, 'the old token fails');
    assert.equal((await liveView(body.mcpToken)).statusCode, 201, 'the new one works');
  });

  test('the dashboard session works on the machine routes too', async () => {
    const headers = asSession(suite.owner.user.session);
    const created = await suite.ctx.app.inject({ method: 'POST', url: '/api/machines', headers, payload: { name: 'from-dashboard' } });
    assert.equal(created.statusCode, 201);
    const list = await suite.ctx.app.inject({ method: 'GET', url: '/api/machines', headers });
    assert.ok(list.json().data.some((m: { id: string }) => m.id === created.json().id));
    const crossSite = await suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${created.json().id}/stop`, headers: { cookie: `session=${suite.owner.user.session}`, origin: 'https://evil.example' } });
    assert.equal(crossSite.statusCode, 403);
    assert.equal(crossSite.json().code, 'cross_site');
    await finishBoot(suite.ctx);
  });
});
