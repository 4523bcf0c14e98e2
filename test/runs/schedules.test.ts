import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';

// Cron is evaluated in UTC whatever the host's zone: run these tests somewhere that is not UTC (and not
// a whole number of hours away), so that a schedule computed in local time would fire at :45 instead of :15.
// Node applies a TZ set at run time to every Date from then on.
process.env.TZ = 'Asia/Kolkata';

import { eventually } from '../support/receiver.ts';
import { assertMachineEvent, assertRunEvent, breakProvider, createMachine, eventCursor, finishBoot, machineSuite, newOwner, runningMachine, runsSettled, workerPass } from '../support/machines.ts';

const START = Date.UTC(2026, 10, 22, 10, 0, 0);
const at = (hh: number, mm: number, ss = 0) => Date.UTC(2026, 10, 22, hh, mm, ss);

describe('schedules', () => {
  const suite = machineSuite();

  test('these tests run in a time zone that is not UTC (Asia/Kolkata, UTC+5:30)', () => {
    assert.equal(new Date(START).getTimezoneOffset(), -330);
    assert.equal(new Date(START).getHours(), 15);
  });

  test('create answers the schedule with its next tick (UTC); get, list and delete', async () => {
    suite.ctx.clock.set(START);
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'cronned' });
    const response = await suite.owner.call('POST', '/api/schedules', { machineId: machine.id, name: ' hourly ', cron: '15 * * * *', command: 'report' });
    assert.equal(response.statusCode, 201);
    const schedule = response.json();
    assert.match(schedule.id, /^sch_[0-9a-z]{26}$/);
    assert.deepEqual({ ...schedule, id: undefined }, {
      id: undefined,
      machineId: machine.id,
      name: 'hourly',
      cron: '15 * * * *',
      command: 'report',
      stopAfter: false,
      nextRunAt: new Date(at(10, 15)).toISOString(),
      lastRunAt: null,
      createdAt: new Date(suite.ctx.clock.now()).toISOString(),
    });
    assert.deepEqual((await suite.owner.call('GET', `/api/schedules/${schedule.id}`)).json(), schedule);
    assert.deepEqual((await suite.owner.call('GET', `/api/schedules?machineId=${machine.id}`)).json(), { data: [schedule], nextCursor: null });

    const stranger = await newOwner(suite.ctx);
    assert.equal((await stranger.call('GET', `/api/schedules/${schedule.id}`)).statusCode, 404);
    assert.equal((await stranger.call('DELETE', `/api/schedules/${schedule.id}`)).statusCode, 404);
    assert.deepEqual((await stranger.call('GET', '/api/schedules')).json(), { data: [], nextCursor: null });

    assert.equal((await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`)).statusCode, 204);
    assert.equal((await suite.owner.call('GET', `/api/schedules/${schedule.id}`)).statusCode, 404);
    assert.equal((await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`)).statusCode, 404);
  });

  test('create refuses bad input', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'picky' });
    const base = { machineId: machine.id, name: 'n', cron: '* * * * *', command: 'ls' };
    const cases: Array<[string, unknown, number]> = [
      ['bad cron', { ...base, cron: 'every day' }, 400],
      ['out of range', { ...base, cron: '61 * * * *' }, 400],
      ['six fields (seconds)', { ...base, cron: '*/5 * * * * *' }, 400],
      ['four fields', { ...base, cron: '* * * *' }, 400],
      ['a nickname (@daily)', { ...base, cron: '@daily' }, 400],
      ['a question mark', { ...base, cron: '0 0 ? * *' }, 400],
      ['L (last day)', { ...base, cron: '0 0 L * *' }, 400],
      ['# (nth weekday)', { ...base, cron: '0 0 * * 1#2' }, 400],
      ['W (nearest weekday)', { ...base, cron: '0 0 15W * *' }, 400],
      ['day names', { ...base, cron: '0 0 * * MON' }, 400],
      ['month names', { ...base, cron: '0 0 1 JAN *' }, 400],
      ['blank name', { ...base, name: '  ' }, 400],
      ['a name with a newline', { ...base, name: 'nightly\nmachine.stopped' }, 400],
      ['a name with an escape sequence', { ...base, name: 'x\u001b[31m' }, 400],
      ['missing command', { machineId: machine.id, name: 'n', cron: '* * * * *' }, 400],
      ['unknown field', { ...base, timezone: 'Europe/Paris' }, 400],
      ['unknown machine', { ...base, machineId: 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz' }, 404],
    ];
    for (const [label, payload, status] of cases) {
      assert.equal((await suite.owner.call('POST', '/api/schedules', payload)).statusCode, status, label);
    }
    for (const cron of ['0 9 * * 1-5', '*/15 * * * *', '0,30 8-18/2 1,15 * 0', '5 4 * 1-12/3 7']) {
      const accepted = await suite.owner.call('POST', '/api/schedules', { ...base, cron });
      assert.equal(accepted.statusCode, 201, `${cron}: numbers, *, ranges, lists and steps are fine`);
      await suite.owner.call('DELETE', `/api/schedules/${accepted.json().id}`);
    }
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    const destroyed = await suite.owner.call('POST', '/api/schedules', base);
    assert.equal(destroyed.statusCode, 409);
    assert.equal(destroyed.json().code, 'invalid_state');
  });

  test('a schedule fires once per tick: run.succeeded with source schedule, then the next tick', async () => {
    suite.ctx.clock.set(START);
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'ticker', labels: { kind: 'cron' } });
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'five', cron: '*/5 * * * *', command: 'sync' })).json();
    assert.equal(schedule.nextRunAt, new Date(at(10, 5)).toISOString());
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    suite.ctx.clock.set(at(10, 4, 59));
    await suite.ctx.app.jobs.drain();
    assert.deepEqual(await events(), []);

    suite.ctx.clock.set(at(10, 5));
    await workerPass(suite.ctx);
    await workerPass(suite.ctx);
    const [event, ...rest] = await events();
    const runs = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data;
    assert.equal(runs.length, 1);
    assert.equal(runs[0].source, 'schedule');
    assert.equal(runs[0].sourceId, schedule.id);
    assertRunEvent(event, 'run.succeeded', { id: runs[0].id, source: 'schedule', sourceId: schedule.id, status: 'succeeded', output: 'sync' }, machine, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    const after = (await suite.owner.call('GET', `/api/schedules/${schedule.id}`)).json();
    assert.equal(after.nextRunAt, new Date(at(10, 10)).toISOString());
    assert.equal(after.lastRunAt, new Date(at(10, 5)).toISOString());

    // Missed ticks are not replayed: an hour late, the schedule fires once.
    suite.ctx.clock.set(at(11, 7));
    await workerPass(suite.ctx);
    assert.equal((await events()).length, 1);
    assert.equal((await suite.owner.call('GET', `/api/schedules/${schedule.id}`)).json().nextRunAt, new Date(at(11, 10)).toISOString());
    await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`);
  });

  test('regression: a long scheduled command stalled the worker pass (boots, expiry, schedules for everyone); it holds only its own job', async () => {
    suite.ctx.clock.set(START);
    const busy = await runningMachine(suite.ctx, suite.owner, { name: 'busy' });
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: busy.id, name: 'long', cron: '0 11 * * *', command: 'sleep 1.5' })).json();
    let finishCommand = () => {};
    const commandFinished = new Promise<void>((resolve) => (finishCommand = resolve));
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === busy.id, () => commandFinished);
    try {
      suite.ctx.clock.set(at(11, 0) - 1000);
      const other = await createMachine(suite.owner, { name: 'booting-meanwhile' });
      suite.ctx.clock.set(at(11, 0));
      // The tick and the boot are both due now, in either order: first the run under way, in its own job.
      const run = await eventually(async () => {
        const [latest] = (await suite.owner.call('GET', `/api/machines/${busy.id}/runs`)).json().data;
        return latest?.status === 'running' ? latest : undefined;
      }, 10_000, 'the scheduled run under way');
      // The command does not finish until the boot has: if the boot waited for it, this would never end.
      await eventually(async () => ((await suite.owner.call('GET', `/api/machines/${other.id}`)).json().status === 'running' ? true : undefined), 10_000, 'the boot, while the command runs');
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'running', 'the run is still under way');
      finishCommand();
      await runsSettled(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/runs/${run.id}`)).json().status, 'succeeded');
    } finally {
      restore();
      await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`);
    }
  });

  test('a schedule boots a stopped machine, runs, and stopAfter stops it: reason "after schedule <name>"', async () => {
    suite.ctx.clock.set(START);
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'sleeper', externalId: 'nightly-box' });
    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'nightly backup', cron: '0 * * * *', command: 'backup --all', stopAfter: true })).json();
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    suite.ctx.clock.set(at(11, 0));
    await suite.ctx.app.jobs.drain();
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'starting');
    const pending = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data[0];
    assert.equal(pending.status, 'pending');
    assert.deepEqual(await events(), []);

    await finishBoot(suite.ctx);
    const [started, succeeded, stopped, ...rest] = await events();
    assertMachineEvent(started, 'machine.started', machine, 'running', {}, suite.ctx.clock.now());
    assertRunEvent(succeeded, 'run.succeeded', { id: pending.id, source: 'schedule', sourceId: schedule.id, status: 'succeeded', output: 'backup --all' }, machine, suite.ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'after schedule nightly backup' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`);
  });

  test("a schedule whose machine cannot boot fails its run (machine.error, then run.failed); a destroyed machine's schedules go with it", async () => {
    suite.ctx.clock.set(START);
    const machine = await createMachine(suite.owner, { name: 'broken', labels: { simulate: 'boot-failure' } });
    await finishBoot(suite.ctx);
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'doomed', cron: '30 10 * * *', command: 'work' })).json();
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    suite.ctx.clock.set(at(10, 30));
    await suite.ctx.app.jobs.drain();
    await finishBoot(suite.ctx);
    const [error, failedRun, ...rest] = await events();
    const run = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data[0];
    assertRunEvent(failedRun, 'run.failed', { id: run.id, source: 'schedule', sourceId: schedule.id, status: 'failed', output: 'The machine failed (boot-failure) before the run could start.' }, machine, suite.ctx.clock.now());
    assertMachineEvent(error, 'machine.error', machine, 'error', { reason: 'boot-failure', message: 'The machine failed to boot.' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assert.equal((await suite.owner.call('GET', `/api/schedules/${schedule.id}`)).statusCode, 404);
  });
});
