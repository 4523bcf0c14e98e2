import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from '../support/app.ts';
import { assertMachineEvent, assertRunEvent, createMachineTestApp, eventCursor, newOwner, runningMachine, type Owner } from '../support/machines.ts';

const RUN_KEYS = ['command', 'createdAt', 'exitCode', 'finishedAt', 'id', 'machineId', 'output', 'source', 'sourceId', 'startedAt', 'status', 'stopAfter'];

describe('manual runs', () => {
  let ctx: TestContext;
  let owner: Owner;
  before(async () => {
    ctx = await createMachineTestApp();
    owner = await newOwner(ctx);
  });
  after(() => ctx.close());

  test('a run on a running machine answers the finished run and emits run.succeeded', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'runner', externalId: 'ext-7', labels: { tier: 'gold' } });
    const events = eventCursor(ctx, owner);
    await events();
    const response = await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'npm test' });
    assert.equal(response.statusCode, 201);
    const run = response.json();
    assert.deepEqual(Object.keys(run).sort(), RUN_KEYS);
    assert.match(run.id, /^run_[0-9a-z]{26}$/);
    const now = new Date(ctx.clock.now()).toISOString();
    assert.deepEqual({ ...run, id: undefined }, {
      id: undefined,
      machineId: machine.id,
      source: 'manual',
      sourceId: null,
      command: 'npm test',
      stopAfter: false,
      status: 'succeeded',
      exitCode: 0,
      output: 'npm test',
      createdAt: now,
      startedAt: now,
      finishedAt: now,
    });
    const [event, ...rest] = await events();
    assertRunEvent(event, 'run.succeeded', { id: run.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'npm test' }, machine, ctx.clock.now());
    assert.deepEqual(rest, []);

    assert.deepEqual((await owner.call('GET', `/api/runs/${run.id}`)).json(), run);
    const list = (await owner.call('GET', `/api/machines/${machine.id}/runs`)).json();
    assert.deepEqual(list, { data: [run], nextCursor: null });
  });

  test('a run whose process died mid-run is failed, with its run.failed, once, after the provider\'s longest run', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'orphan-host' });
    const finished = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'make' })).json();
    // What a process killed between starting and finishing a run leaves behind.
    await ctx.app.deps.db.updateTable('runs').set({ status: 'running', finished_at: null, exit_code: null }).where('id', '=', finished.id).execute();
    const events = eventCursor(ctx, owner);
    await events();
    ctx.clock.advance(59_000);
    await ctx.app.machineWorker.tick();
    assert.equal((await owner.call('GET', `/api/runs/${finished.id}`)).json().status, 'running', 'not before the provider says a run may take');
    ctx.clock.advance(2_000);
    await ctx.app.machineWorker.tick();
    await ctx.app.machineWorker.tick();
    const run = (await owner.call('GET', `/api/runs/${finished.id}`)).json();
    assert.equal(run.status, 'failed');
    assert.equal(run.output, 'The run was interrupted: the service stopped while it ran.');
    const fresh = await events();
    assert.equal(fresh.length, 1, 'one event, however many passes');
    assertRunEvent(fresh[0], 'run.failed', { id: finished.id, source: 'manual', sourceId: null, status: 'failed', output: run.output }, machine, ctx.clock.now());
  });

  test('`false` and a command ending in `exit N` fail with run.failed; anything else succeeds', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'judge' });
    const events = eventCursor(ctx, owner);
    await events();
    const cases: Array<[string, 'succeeded' | 'failed', number]> = [
      ['false', 'failed', 1],
      ['make check; exit 2', 'failed', 2],
      ['exit 0', 'succeeded', 0],
      ['echo exit 3 later', 'succeeded', 0],
      ['true', 'succeeded', 0],
    ];
    for (const [command, status, exitCode] of cases) {
      const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command })).json();
      assert.equal(run.status, status, command);
      assert.equal(run.exitCode, exitCode, command);
      const [event] = await events();
      assertRunEvent(event, status === 'succeeded' ? 'run.succeeded' : 'run.failed', { id: run.id, source: 'manual', sourceId: null, status, output: command }, machine, ctx.clock.now());
    }
  });

  test('run events carry the first 2,000 characters of the output; the run keeps all of it', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'chatty' });
    const events = eventCursor(ctx, owner);
    await events();
    // 1,999 ASCII characters, then characters outside the BMP: the cut must not split one in half.
    const command = `${'a'.repeat(1999)}${'😀'.repeat(600)}`;
    const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command })).json();
    assert.equal(run.output, command);
    const [event] = await events();
    const output = (event!.data.run as { output: string }).output;
    assert.equal(Array.from(output).length, 2000);
    assert.equal(output, `${'a'.repeat(1999)}😀`);
  });

  test('stopAfter stops the machine after the run: run.succeeded, then machine.stopped (requested)', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'one-shot' });
    const events = eventCursor(ctx, owner);
    await events();
    const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'backup', stopAfter: true })).json();
    assert.equal(run.stopAfter, true);
    const [succeeded, stopped, ...rest] = await events();
    assertRunEvent(succeeded, 'run.succeeded', { id: run.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'backup' }, machine, ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'requested' }, ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('run errors: 400 bad body, 409 machine not running, 404 unknown or foreign run', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'strict' });
    for (const payload of [{}, { command: '' }, { command: 'x'.repeat(10_001) }, { command: 'ls', extra: true }, { command: 'ls', stopAfter: 'yes' }]) {
      const response = await owner.call('POST', `/api/machines/${machine.id}/runs`, payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload).slice(0, 60));
    }
    const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'ls' })).json();
    const stranger = await newOwner(ctx);
    assert.equal((await stranger.call('GET', `/api/runs/${run.id}`)).statusCode, 404);
    assert.equal((await owner.call('GET', '/api/runs/run_01jzzzzzzzzzzzzzzzzzzzzzzz')).statusCode, 404);
    await owner.call('POST', `/api/machines/${machine.id}/stop`);
    const notRunning = await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'ls' });
    assert.equal(notRunning.statusCode, 409);
    assert.equal(notRunning.json().code, 'invalid_state');
  });
});
