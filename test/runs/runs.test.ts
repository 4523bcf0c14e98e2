import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { eventually } from '../support/receiver.ts';
import { assertMachineEvent, assertRunEvent, breakProvider, eventCursor, finishedRun, machineSuite, newOwner, runningMachine, runsSettled, workerPass } from '../support/machines.ts';
import { executeRun, INTERRUPTED_RUN_OUTPUT } from '../../src/runs/runs.service.ts';

/** A gate a stalled provider call waits at until the test opens it. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open };
}

const RUN_KEYS = ['command', 'createdAt', 'exitCode', 'finishedAt', 'id', 'machineId', 'output', 'source', 'sourceId', 'startedAt', 'status', 'stderr', 'stdout', 'stopAfter', 'timedOut', 'truncated'];

describe('manual runs', () => {
  const suite = machineSuite();

  test('a run on a running machine answers at once with the queued run; it executes in the background and emits run.succeeded', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'runner', externalId: 'ext-7', labels: { tier: 'gold' } });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const response = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'npm test' });
    assert.equal(response.statusCode, 201);
    const queued = response.json();
    assert.deepEqual(Object.keys(queued).sort(), RUN_KEYS);
    assert.match(queued.id, /^run_[0-9a-z]{26}$/);
    const now = new Date(suite.ctx.clock.now()).toISOString();
    assert.deepEqual({ ...queued, id: undefined }, {
      id: undefined,
      machineId: machine.id,
      source: 'manual',
      sourceId: null,
      command: 'npm test',
      stopAfter: false,
      status: 'pending',
      exitCode: null,
      output: null,
      stdout: null,
      stderr: null,
      truncated: false,
      timedOut: false,
      createdAt: now,
      startedAt: null,
      finishedAt: null,
    }, 'not yet run: the request does not wait for the command');

    await runsSettled(suite.ctx);
    const run = (await suite.owner.call('GET', `/api/runs/${queued.id}`)).json();
    assert.deepEqual(run, { ...queued, status: 'succeeded', exitCode: 0, output: 'npm test', stdout: 'npm test', stderr: '', startedAt: now, finishedAt: now });
    const [event, ...rest] = await events();
    assertRunEvent(event, 'run.succeeded', { id: run.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'npm test' }, machine, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    const list = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json();
    assert.deepEqual(list, { data: [run], nextCursor: null });
  });

  test('regression: the request waited for the command (1.5 s provider, 1,510 ms answer); it answers at once, the run still going', { timeout: 15_000 }, async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'slow-host' });
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id, () => sleep(1500));
    try {
      const started = performance.now();
      const response = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'make slowly' });
      assert.ok(performance.now() - started < 1000, `answered in ${Math.round(performance.now() - started)} ms`);
      assert.equal(response.statusCode, 201);
      const run = response.json();
      assert.equal(run.status, 'pending');
      await eventually(async () => ((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status === 'running' ? true : undefined), 5000, 'the run to start');
      await runsSettled(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'succeeded');
    } finally {
      restore();
    }
  });

  test('regression: a run longer than the old 60 s limit was failed although its process was alive; it is not, and ends normally', { timeout: 120_000 }, async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'long-haul' });
    const slow = gate();
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id, slow.wait);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    try {
      const run = (await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'make world', stopAfter: true })).json();
      await eventually(async () => ((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status === 'running' ? true : undefined), 5000, 'the run to start');
      // Ten minutes pass while its process lives: its lease is renewed by the heartbeat, and every due job is looked for.
      // In steps of one heartbeat, each given up to 100 ms of real time for the renewal due then: a clock that runs 5 s
      // past a renewal still under way is a process that stood still past its lease, whose attempt is let go (on a
      // loaded machine, 2 ms per step was not enough). A renewal is not always due at a step (a late one moves the next
      // on): that step waits its 100 ms and goes on.
      const leasesRenewed = async (now: number) => (await suite.ctx.app.deps.db.selectFrom('jobs').select('locked_until').where('locked_by', 'is not', null).execute())
        .every((job) => job.locked_until! >= now + 6_000);
      for (let step = 0; step < 300; step++) {
        suite.ctx.clock.advance(2_000);
        const now = suite.ctx.clock.now();
        const giveUpAt = performance.now() + 100;
        while (!(await leasesRenewed(now)) && performance.now() < giveUpAt) await sleep(2);
      }
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'running', 'ten minutes in, its process alive: still running');
      assert.deepEqual(await events(), []);
      slow.open();
      await runsSettled(suite.ctx);
      const finished = (await suite.owner.call('GET', `/api/runs/${run.id}`)).json();
      assert.equal(finished.status, 'succeeded');
      const [succeeded, stopped, ...rest] = await events();
      assertRunEvent(succeeded, 'run.succeeded', { id: run.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'make world' }, machine, suite.ctx.clock.now());
      assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'requested' }, suite.ctx.clock.now());
      assert.deepEqual(rest, []);
    } finally {
      slow.open();
      restore();
    }
  });

  test("a run whose process died mid-run is finished once, from the machine's record, when its job's lease runs out", async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'orphan-host' });
    const finished = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'make' });
    // What a process killed while executing a run leaves behind: the run running, its job leased to the dead process a while more.
    const leaseUntil = suite.ctx.clock.now() + 8_000;
    await suite.ctx.app.deps.db
      .updateTable('runs')
      .set({ status: 'running', finished_at: null, exit_code: null, output: null })
      .where('id', '=', finished.id)
      .execute();
    await suite.ctx.app.deps.db
      .insertInto('jobs')
      .values({
        id: 'job_01orphan0000000000000000000',
        kind: 'run.execute',
        lane: null,
        key: null,
        payload: JSON.stringify({ runId: finished.id }),
        run_at: suite.ctx.clock.now(),
        attempts: 0,
        locked_by: 'dead-host/1234/abcd',
        locked_until: leaseUntil,
        last_error: null,
        created_at: suite.ctx.clock.now(),
      })
      .execute();
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.set(leaseUntil - 1);
    await suite.ctx.app.jobs.drain();
    assert.equal((await suite.owner.call('GET', `/api/runs/${finished.id}`)).json().status, 'running', 'not while the lease holds');
    suite.ctx.clock.set(leaseUntil + 1);
    await suite.ctx.app.jobs.drain();
    await suite.ctx.app.jobs.drain();
    const run = (await suite.owner.call('GET', `/api/runs/${finished.id}`)).json();
    assert.equal(run.status, 'succeeded');
    assert.equal(run.output, 'make', "the machine's answer, not an interruption");
    const fresh = await events();
    assert.equal(fresh.length, 1, 'one event, however many passes');
    assertRunEvent(fresh[0], 'run.succeeded', { id: finished.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'make' }, machine, suite.ctx.clock.now());
  });

  test('a run taken over from a stopped machine that cannot say how it ended is failed as interrupted, once', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'cut-short' });
    // A ten-minute command whose process took it up and died (no job left to run here); then the machine was stopped under it.
    const finished = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'make' });
    const queued = { id: finished.id };
    await suite.ctx.app.deps.db
      .updateTable('runs')
      .set({ command: 'sleep 600', status: 'running', started_at: suite.ctx.clock.now(), finished_at: null, exit_code: null, output: null })
      .where('id', '=', queued.id)
      .execute();
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await workerPass(suite.ctx);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    assert.equal(await executeRun(suite.ctx.app.deps, suite.ctx.app.machineProvider, queued.id, new AbortController().signal), 'done');
    assert.equal(await executeRun(suite.ctx.app.deps, suite.ctx.app.machineProvider, queued.id, new AbortController().signal), 'done');
    const run = (await suite.owner.call('GET', `/api/runs/${queued.id}`)).json();
    assert.equal(run.status, 'failed');
    assert.equal(run.output, INTERRUPTED_RUN_OUTPUT);
    assert.deepEqual((await events()).map((event) => event.type), ['run.failed']);
  });

  test('a run taken over while its first process still waits for it is recorded once, and its stopAfter stops the machine once', { timeout: 15_000 }, async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'outlived' });
    const slow = gate();
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id, slow.wait);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    try {
      const run = (await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'deploy', stopAfter: true })).json();
      await eventually(async () => ((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status === 'running' ? true : undefined), 5000, 'the run to start');
      // Another process, seeing the job's lease run out (this one stalled), takes the job up: it waits for the machine's outcome too.
      const other = executeRun(suite.ctx.app.deps, suite.ctx.app.machineProvider, run.id, new AbortController().signal);
      slow.open();
      assert.equal(await other, 'done');
      await runsSettled(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'succeeded');
      assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'stopped');
      assert.deepEqual((await events()).map((e) => e.type), ['run.succeeded', 'machine.stopped']);
    } finally {
      slow.open();
      restore();
    }
  });

  test('`false` and a command ending in `exit N` fail with run.failed; anything else succeeds', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'judge' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const cases: Array<[string, 'succeeded' | 'failed', number]> = [
      ['false', 'failed', 1],
      ['make check; exit 2', 'failed', 2],
      ['exit 0', 'succeeded', 0],
      ['echo exit 3 later', 'succeeded', 0],
      ['true', 'succeeded', 0],
    ];
    for (const [command, status, exitCode] of cases) {
      const run = await finishedRun(suite.ctx, suite.owner, machine.id, { command });
      assert.equal(run.status, status, command);
      assert.equal(run.exitCode, exitCode, command);
      const [event] = await events();
      assertRunEvent(event, status === 'succeeded' ? 'run.succeeded' : 'run.failed', { id: run.id, source: 'manual', sourceId: null, status, output: command }, machine, suite.ctx.clock.now());
    }
  });

  test('run events carry the first 2,000 characters of the output; the run keeps all of it', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'chatty' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    // 1,999 ASCII characters, then characters outside the BMP: the cut must not split one in half.
    const command = `${'a'.repeat(1999)}${'😀'.repeat(600)}`;
    const run = await finishedRun(suite.ctx, suite.owner, machine.id, { command });
    assert.equal(run.output, command);
    const [event] = await events();
    const output = (event!.data.run as { output: string }).output;
    assert.equal(Array.from(output).length, 2000);
    assert.equal(output, `${'a'.repeat(1999)}😀`);
  });

  test('stopAfter stops the machine after the run: run.succeeded, then machine.stopped (requested)', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'one-shot' });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const run = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'backup', stopAfter: true });
    assert.equal(run.stopAfter, true);
    const [succeeded, stopped, ...rest] = await events();
    assertRunEvent(succeeded, 'run.succeeded', { id: run.id, source: 'manual', sourceId: null, status: 'succeeded', output: 'backup' }, machine, suite.ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'requested' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('regression: a run whose host stopped answering was failed after four attempts (~35 s), though the host came back; it waits for the host and is finished once, from what the machine says', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'far-away' });
    const provider = suite.ctx.app.machineProvider as { hosts?: unknown };
    let answering = false;
    provider.hosts = { ping: async () => answering, probe: async () => ({ cpus: 1, memoryBytes: 1, diskBytes: null }), attach: async () => ({ cpus: 1, memoryBytes: 1, diskBytes: null }), attached: () => ['local'], capacityOf: () => null };
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id && !answering);
    let calls = 0;
    const count = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id, async () => void calls++);
    try {
      const run = (await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'make far' })).json();
      // Ten minutes of a silent host, in steps of a retry: the run stays running, its record kept.
      for (let step = 0; step < 120; step++) {
        await workerPass(suite.ctx);
        suite.ctx.clock.advance(5_000);
      }
      await workerPass(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'running');
      answering = true;
      suite.ctx.clock.advance(5_000);
      await workerPass(suite.ctx);
      const finished = (await suite.owner.call('GET', `/api/runs/${run.id}`)).json();
      assert.equal(finished.status, 'succeeded', JSON.stringify(finished));
      assert.equal(finished.output, 'make far');
      const asked = calls;
      suite.ctx.clock.advance(60_000);
      await workerPass(suite.ctx);
      assert.equal(calls, asked, 'the finished run is never asked for again');
    } finally {
      count();
      restore();
      delete provider.hosts;
    }
  });

  test('run errors: 400 bad body, 409 machine not running, 404 unknown or foreign run', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'strict' });
    for (const payload of [{}, { command: '' }, { command: 'x'.repeat(10_001) }, { command: 'ls', extra: true }, { command: 'ls', stopAfter: 'yes' }]) {
      const response = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload).slice(0, 60));
    }
    const run = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'ls' });
    const stranger = await newOwner(suite.ctx);
    assert.equal((await stranger.call('GET', `/api/runs/${run.id}`)).statusCode, 404);
    assert.equal((await suite.owner.call('GET', '/api/runs/run_01jzzzzzzzzzzzzzzzzzzzzzzz')).statusCode, 404);
    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    const notRunning = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'ls' });
    assert.equal(notRunning.statusCode, 409);
    assert.equal(notRunning.json().code, 'invalid_state');
  });
});
