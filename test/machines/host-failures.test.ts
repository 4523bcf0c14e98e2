import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { inTransaction } from '../../src/db/transaction.ts';
import { machineCheckJob } from '../../src/machines/job-types.ts';
import type { TestContext } from '../support/app.ts';
import {
  assertMachineEvent,
  assertRunEvent,
  BOOT_MS,
  breakProvider,
  createMachine,
  eventCursor,
  finishBoot,
  jobOf,
  machineSuite,
  runningMachine,
  workerPass,
} from '../support/machines.ts';

const at = (hh: number, mm: number, ss = 0) => Date.UTC(2026, 10, 22, hh, mm, ss);

/** A gate a stalled provider call waits at until the test opens it. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open };
}

/** Counts the provider's calls of one kind for one machine, leaving them as they are. */
function countCalls(ctx: TestContext, method: 'observe' | 'stop' | 'destroy', machineId: string): { count: number; restore: () => void } {
  const counter = { count: 0, restore: () => {} };
  counter.restore = breakProvider(ctx, method, (m) => m.id === machineId, async () => {
    counter.count++;
  });
  return counter;
}

describe('a host that fails', () => {
  const suite = machineSuite();

  const machineRow = (id: string) => suite.ctx.app.deps.db.selectFrom('machines').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  test('regression: one failing provider call ended the worker pass for every account; the failing machines are put off, the rest proceeds', async () => {
    suite.ctx.clock.set(at(10, 0, 30));
    const scheduled = await runningMachine(suite.ctx, suite.owner, { name: 'on-schedule' });
    const expiring = await runningMachine(suite.ctx, suite.owner, { name: 'unstoppable', expiresAt: new Date(at(10, 0, 50)).toISOString() });
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: scheduled.id, name: 'minutely', cron: '* * * * *', command: 'report' })).json();
    const unreachable = await createMachine(suite.owner, { name: 'unreachable' });
    const observeFails = breakProvider(suite.ctx, 'observe', (m) => m.id === unreachable.id);
    const stopFails = breakProvider(suite.ctx, 'stop', (m) => m.id === expiring.id);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    try {
      suite.ctx.clock.set(at(10, 1));
      await workerPass(suite.ctx);

      const fresh = await events();
      const run = (await suite.owner.call('GET', `/api/machines/${scheduled.id}/runs`)).json().data[0];
      assertRunEvent(fresh.find((e) => e.type === 'run.succeeded'), 'run.succeeded', { id: run.id, source: 'schedule', sourceId: schedule.id, status: 'succeeded', output: 'report' }, scheduled, suite.ctx.clock.now());
      assertMachineEvent(fresh.find((e) => e.type === 'machine.expired'), 'machine.expired', expiring, 'running', { expiresAt: new Date(at(10, 0, 50)).toISOString(), onExpire: 'stop' }, suite.ctx.clock.now());
      assertMachineEvent(fresh.find((e) => e.type === 'machine.error'), 'machine.error', expiring, 'error', { reason: 'stop-failure', message: 'The host could not stop the machine.' }, suite.ctx.clock.now());
      assert.deepEqual(fresh.map((e) => e.type).sort(), ['machine.error', 'machine.expired', 'run.succeeded']);
      assert.equal((await suite.owner.call('GET', `/api/machines/${expiring.id}`)).json().status, 'error', 'the host failed to stop it: error, not a machine the database calls running');

      assert.equal((await machineRow(unreachable.id)).status, 'starting');
      const check = await jobOf(suite.ctx, 'machine.check', unreachable.id);
      assert.equal(check?.attempts, 1);
      assert.equal(check?.run_at, suite.ctx.clock.now() + 5_000, 'asked again in 5 s, not at the head of the next pass');
      const calls = countCalls(suite.ctx, 'observe', unreachable.id);
      await workerPass(suite.ctx);
      assert.equal(calls.count, 0, 'left alone until then');
      suite.ctx.clock.advance(5_000);
      await workerPass(suite.ctx);
      assert.equal(calls.count, 1);
      assert.equal((await jobOf(suite.ctx, 'machine.check', unreachable.id))?.run_at, suite.ctx.clock.now() + 10_000, 'then 10 s: the delay grows');
      calls.restore();

      observeFails();
      suite.ctx.clock.advance(10_000);
      await workerPass(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/machines/${unreachable.id}`)).json().status, 'running', 'the host is back: the boot completes');
      assert.equal((await jobOf(suite.ctx, 'machine.check', unreachable.id))?.attempts ?? 0, 0, 'its failures are forgotten');
    } finally {
      observeFails();
      stopFails();
      await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`);
    }
  });

  test('regression: the host was asked to stop before the compare-and-set; two stops at once ask it once, the loser gets 409 and the host and database agree', { timeout: 15_000 }, async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'contested' });
    const slow = gate();
    const calls = { count: 0 };
    const restore = breakProvider(suite.ctx, 'stop', (m) => m.id === machine.id, async () => {
      calls.count++;
      await slow.wait();
    });
    try {
      const first = suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
      const second = suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
      const loser = await Promise.race([first, second]);
      assert.equal(loser.statusCode, 409);
      assert.equal(loser.json().code, 'invalid_state');
      assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'stopping', 'recorded before the host is asked');
      slow.open();
      const answers = await Promise.all([first, second]);
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 409]);
      assert.equal(calls.count, 1, 'only the winner asked the host');
      assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'stopped');
    } finally {
      slow.open();
      restore();
    }
  });

  test('a failed stop or destroy leaves the machine in error with machine.error (502 provider_error); it can be destroyed again', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'stubborn', externalId: 'ext-9', labels: { tier: 'x' } });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const stopFails = breakProvider(suite.ctx, 'stop', (m) => m.id === machine.id);
    const stop = await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    stopFails();
    assert.equal(stop.statusCode, 502);
    assert.equal(stop.json().code, 'provider_error');
    assert.ok(!stop.body.includes('host unreachable'), 'the provider’s own message stays in the log');
    let [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'stop-failure', message: 'The host could not stop the machine.' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    const destroyFails = breakProvider(suite.ctx, 'destroy', (m) => m.id === machine.id);
    const destroy = await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    destroyFails();
    assert.equal(destroy.statusCode, 502);
    [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'destroy-failure', message: 'The host could not destroy the machine.' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    const retry = await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assert.equal(retry.statusCode, 200);
    assert.equal(retry.json().status, 'destroyed');
    [event, ...rest] = await events();
    assertMachineEvent(event, 'machine.destroyed', machine, 'destroyed', { reason: 'requested' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('a stop whose process died after recording it (machine left stopping) is finished by the worker, once', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'half-stopped' });
    const row = await machineRow(machine.id);
    // What a process that died between the compare-and-set and the host's answer leaves behind: stopping, checked in 60 s.
    await inTransaction(suite.ctx.app.deps.database, async (tx) => {
      await tx.db
        .updateTable('machines')
        .set({ status: 'stopping', pending_action: 'stop', pending_reason: 'after schedule nightly', version: row.version + 1 })
        .where('id', '=', machine.id)
        .execute();
      await suite.ctx.app.deps.jobs.schedule(tx, machineCheckJob, machine.id, { machineId: machine.id }, suite.ctx.clock.now() + 60_000);
    });
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.advance(59_000);
    await workerPass(suite.ctx);
    assert.deepEqual(await events(), [], 'not while the stopping process may still be at it');
    suite.ctx.clock.advance(1_000);
    await workerPass(suite.ctx);
    await workerPass(suite.ctx);
    const [stopped, ...rest] = await events();
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'after schedule nightly' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
  });

  test('a host that refuses a boot: create answers the machine in error with machine.error; start answers 502 and leaves it in error', async () => {
    const bootFails = breakProvider(suite.ctx, 'boot', (m) => m.name === 'unbootable');
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    try {
      const created = await suite.owner.call('POST', '/api/machines', { name: 'unbootable', labels: { a: 'b' } });
      assert.equal(created.statusCode, 201, 'the machine exists; its boot failed');
      const machine = created.json();
      assert.equal(machine.status, 'error');
      assert.match(machine.mcpToken, /^tmm_/);
      let [event, ...rest] = await events();
      assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'boot-failure', message: 'The host could not boot the machine.' }, suite.ctx.clock.now());
      assert.deepEqual(rest, []);
      await finishBoot(suite.ctx);
      assert.deepEqual(await events(), [], 'nothing is left booting');

      const start = await suite.owner.call('POST', `/api/machines/${machine.id}/start`);
      assert.equal(start.statusCode, 502);
      assert.equal(start.json().code, 'provider_error');
      [event, ...rest] = await events();
      assertMachineEvent(event, 'machine.error', machine, 'error', { reason: 'boot-failure', message: 'The host could not boot the machine.' }, suite.ctx.clock.now());
      assert.deepEqual(rest, []);
      assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'error');

      bootFails();
      assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).json().status, 'starting', 'retryable once the host is back');
      suite.ctx.clock.advance(BOOT_MS);
      await workerPass(suite.ctx);
      [event, ...rest] = await events();
      assertMachineEvent(event, 'machine.created', machine, 'running', {}, suite.ctx.clock.now());
      assert.deepEqual(rest, []);
    } finally {
      bootFails();
    }
  });

  test('a pool whose replacement boots fail is retried later, without failing the claim or the pass', async () => {
    const pool = (await suite.owner.call('POST', '/api/pools', { name: 'flaky', size: 'small', count: 1 })).json();
    await finishBoot(suite.ctx);
    const bootFails = breakProvider(suite.ctx, 'boot', (m) => m.name.startsWith('flaky-'));
    try {
      const claim = await suite.owner.call('POST', '/api/machines', { name: 'taken', pool: 'flaky' });
      assert.equal(claim.statusCode, 201, 'the claim does not depend on the replacement');
      await workerPass(suite.ctx);
      const refill = await jobOf(suite.ctx, 'pool.refill', pool.id);
      assert.ok(refill !== undefined && refill.run_at > suite.ctx.clock.now(), 'the refill is tried again later');
      bootFails();
      suite.ctx.clock.advance(5 * 60_000);
      await workerPass(suite.ctx);
      await finishBoot(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 1);
    } finally {
      bootFails();
      await suite.owner.call('DELETE', `/api/pools/${pool.id}`);
    }
  });
});
