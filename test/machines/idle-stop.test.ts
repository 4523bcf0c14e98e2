import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { ACTIVITY_WRITE_MS } from '../../src/machines/activity.ts';
import { markStopping } from '../../src/machines/machine-transitions.ts';
import { findMachineById, recordActivity } from '../../src/machines/machines.repository.ts';
import { freshDatabase } from '../support/database.ts';
import { createMachine, createMachineTestApp, eventsOf, finishBoot, finishedRun, jobOf, machineSuite, newOwner, runningMachine, workerPass, type Owner } from '../support/machines.ts';

const SECOND = 1000;
const MINUTE = 60 * SECOND;

/**
 * Idle stop (issue 41, CONTRACT 20) on the simulated provider with the
 * injected clock: what stops a machine (a minute of no activity), what keeps
 * it awake (a request on it, a run still running), what never stops (0, a
 * paused machine, a warm pool machine), and PATCH's checks.
 */
describe('idle stop (CONTRACT 20)', () => {
  // The contract's default, as a service run without MACHINE_AUTO_STOP_MINUTES has it (test apps turn it off).
  const suite = machineSuite({ env: { MACHINE_AUTO_STOP_MINUTES: String(loadConfig({}).machines.autoStopMinutes) } });
  let stranger: Owner;
  before(async () => {
    stranger = await newOwner(suite.ctx);
  });

  const machineOf = async (id: string) => (await suite.owner.call('GET', `/api/machines/${id}`)).json();
  /** Moves the clock in steps (each a worker pass), as a worker polling would see it. */
  async function pass(ms: number, step = 10 * SECOND): Promise<void> {
    for (let moved = 0; moved < ms; moved += step) {
      suite.ctx.clock.advance(Math.min(step, ms - moved));
      await workerPass(suite.ctx);
    }
  }
  const stopsOf = async (id: string) =>
    (await eventsOf(suite.ctx, suite.owner)).filter((event) => event.type === 'machine.stopped' && (event.data.machine as { id: string }).id === id).map((event) => (event.data.detail as { reason: string }).reason);

  test('the default is 15 minutes (MACHINE_AUTO_STOP_MINUTES unset), shown in answers', async () => {
    assert.equal(loadConfig({}).machines.autoStopMinutes, 15);
    const machine = await createMachine(suite.owner, { name: 'defaulted' });
    assert.equal((machine as unknown as { autoStopMinutes: number }).autoStopMinutes, 15);
    assert.equal((await machineOf(machine.id)).autoStopMinutes, 15);
    const listed = (await suite.owner.call('GET', '/api/machines')).json().data.find((m: { id: string }) => m.id === machine.id);
    assert.equal(listed.autoStopMinutes, 15);
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
  });

  test('a machine with autoStopMinutes 1 stops with reason idle after a minute of no activity, once', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'idler', autoStopMinutes: 1 });
    await pass(50 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running', 'not before its minute');
    await pass(20 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
    assert.deepEqual(await stopsOf(machine.id), ['idle']);
    // Nothing more happens to a stopped machine, and a start gives it a new minute.
    await pass(2 * MINUTE, MINUTE);
    assert.deepEqual(await stopsOf(machine.id), ['idle']);
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
    await finishBoot(suite.ctx);
    await pass(50 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running', 'a start counts its minute from the start');
    await pass(20 * SECOND);
    assert.deepEqual(await stopsOf(machine.id), ['idle', 'idle']);
  });

  test('a machine with a run still running is not idle; once the run ends, its minute counts from the end', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'busy', autoStopMinutes: 1 });
    // A run that another process executes (still running), as the table has it.
    const run = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'make' });
    await suite.ctx.app.deps.db.updateTable('runs').set({ status: 'running', finished_at: null, exit_code: null }).where('id', '=', run.id).execute();
    await pass(5 * MINUTE, 20 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running', 'a running run keeps it awake');
    assert.deepEqual(await stopsOf(machine.id), []);
    // The run ends (recorded as any end is: activity at its end).
    const end = suite.ctx.clock.now();
    await suite.ctx.app.deps.db.updateTable('runs').set({ status: 'succeeded', finished_at: end, exit_code: 0 }).where('id', '=', run.id).execute();
    await recordActivity(suite.ctx.app.deps.db, machine.id, end);
    await pass(50 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running');
    await pass(MINUTE);
    assert.deepEqual(await stopsOf(machine.id), ['idle']);
  });

  test("activity (an API call on the machine) pushes the stop back; another account's refused call does not", async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'used', autoStopMinutes: 1 });
    await pass(40 * SECOND);
    const shot = await suite.owner.call('GET', `/api/machines/${machine.id}/screenshot`);
    assert.equal(shot.statusCode, 200, shot.body);
    await pass(40 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running', 'a minute after its boot, but 40 s after its last use');
    // A stranger's call is refused (404) and keeps nothing awake.
    assert.equal((await stranger.call('GET', `/api/machines/${machine.id}/screenshot`)).statusCode, 404);
    // Reading the machine's record is not using it.
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).statusCode, 200);
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).statusCode, 200);
    await pass(30 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
    assert.deepEqual(await stopsOf(machine.id), ['idle']);
  });

  test("the machine's MCP endpoint (with its machine token) and a live view are activity", async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'agent-driven', autoStopMinutes: 1 });
    const lastActive = async () => (await findMachineById(suite.ctx.app.deps.db, machine.id))!.last_active_at;
    await pass(40 * SECOND);
    const mcp = await suite.ctx.app.inject({
      method: 'POST',
      url: `/api/machines/${machine.id}/mcp`,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${machine.mcpToken}` },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    assert.equal(mcp.statusCode, 200, mcp.body);
    assert.equal(await lastActive(), suite.ctx.clock.now(), 'an MCP request is activity');

    await pass(40 * SECOND);
    const link = await suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/live-view`, headers: { authorization: `Bearer ${machine.mcpToken}` } });
    assert.equal(link.statusCode, 201, link.body);
    assert.notEqual(await lastActive(), suite.ctx.clock.now(), 'making a link is not using the machine');
    const pagePath = new URL(link.json().url).pathname;
    assert.equal((await suite.ctx.app.inject({ method: 'GET', url: pagePath })).statusCode, 200);
    assert.equal(await lastActive(), suite.ctx.clock.now(), 'a live view is activity');
    await pass(40 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running', '80 s after its MCP call, 40 s after its live view');
    await pass(30 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
  });

  test('a run started on the machine is activity until it ends', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'runner', autoStopMinutes: 1 });
    await pass(50 * SECOND);
    await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'echo hi' });
    await pass(50 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running');
    await pass(20 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
  });

  test('autoStopMinutes 0 never stops', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'keeper', autoStopMinutes: 0 });
    await pass(3 * 60 * MINUTE, 10 * MINUTE);
    assert.equal((await machineOf(machine.id)).status, 'running');
    assert.equal(await jobOf(suite.ctx, 'machine.idle-stop', machine.id), undefined, 'no idle check is even scheduled');
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
  });

  test('a paused machine is not idle-stopped; a resume gives it a new minute', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'frozen', autoStopMinutes: 1 });
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    await pass(5 * MINUTE, 30 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'paused');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/resume`)).statusCode, 200);
    await pass(50 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'running');
    await pass(20 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
    assert.deepEqual(await stopsOf(machine.id), ['idle']);
  });

  test("a pool's warm machines never idle; a claimed one counts from its claim", async () => {
    const pool = await suite.owner.call('POST', '/api/pools', { name: 'idle-pool', size: 'small', count: 1 });
    assert.equal(pool.statusCode, 201, pool.body);
    await finishBoot(suite.ctx);
    await pass(30 * MINUTE, 5 * MINUTE);
    const claim = await suite.owner.call('POST', '/api/machines', { name: 'claimed', pool: 'idle-pool', autoStopMinutes: 1 });
    assert.equal(claim.statusCode, 201, claim.body);
    assert.equal(claim.json().autoStopMinutes, 1);
    assert.equal(claim.json().status, 'running', 'the warm machine was up for 30 minutes, never stopped');
    await pass(50 * SECOND);
    assert.equal((await machineOf(claim.json().id)).status, 'running', 'its minute counts from the claim');
    await pass(20 * SECOND);
    assert.equal((await machineOf(claim.json().id)).status, 'stopped');
    assert.equal((await suite.owner.call('DELETE', `/api/pools/${pool.json().id}`)).statusCode, 204);
  });

  test('PATCH changes autoStopMinutes and moves the idle check; bad values are a 400 that changes nothing', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'patched', autoStopMinutes: 0 });
    for (const body of [{ autoStopMinutes: -1 }, { autoStopMinutes: 10_081 }, { autoStopMinutes: 1.5 }, { autoStopMinutes: '5' }, { autoStopMinutes: null }, {}, { autoStopMinutes: 5, name: 'other' }]) {
      const refused = await suite.owner.call('PATCH', `/api/machines/${machine.id}`, body);
      assert.equal(refused.statusCode, 400, `${JSON.stringify(body)}: ${refused.body}`);
      assert.equal(refused.json().code, 'invalid_request');
    }
    assert.equal((await machineOf(machine.id)).autoStopMinutes, 0, 'nothing changed');
    const notJson = await suite.ctx.app.inject({ method: 'PATCH', url: `/api/machines/${machine.id}`, headers: { authorization: `Bearer ${suite.owner.key}`, 'content-type': 'text/plain' }, payload: 'autoStopMinutes=1' });
    assert.equal(notJson.statusCode, 415);
    // Another account's machine, and an unknown one: 404, nothing changed.
    assert.equal((await stranger.call('PATCH', `/api/machines/${machine.id}`, { autoStopMinutes: 1 })).statusCode, 404);
    assert.equal((await suite.owner.call('PATCH', '/api/machines/mch_00000000000000000000000000', { autoStopMinutes: 1 })).statusCode, 404);
    assert.equal((await machineOf(machine.id)).autoStopMinutes, 0);

    await pass(10 * MINUTE, MINUTE);
    const changed = await suite.owner.call('PATCH', `/api/machines/${machine.id}`, { autoStopMinutes: 10_080 });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.equal(changed.json().autoStopMinutes, 10_080);
    assert.deepEqual(changed.json(), await machineOf(machine.id));
    // Down to 1 on a machine idle for 10 minutes already: it stops at its next check, at once.
    assert.equal((await suite.owner.call('PATCH', `/api/machines/${machine.id}`, { autoStopMinutes: 1 })).json().autoStopMinutes, 1);
    await pass(SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
    assert.deepEqual(await stopsOf(machine.id), ['idle']);

    // Back to 0 before the minute is up: it never stops.
    const second = await runningMachine(suite.ctx, suite.owner, { name: 'reprieved', autoStopMinutes: 1 });
    await pass(40 * SECOND);
    assert.equal((await suite.owner.call('PATCH', `/api/machines/${second.id}`, { autoStopMinutes: 0 })).statusCode, 200);
    await pass(10 * MINUTE, MINUTE);
    assert.equal((await machineOf(second.id)).status, 'running');
    // A stopped machine takes the setting too; a destroyed one does not.
    assert.equal((await suite.owner.call('PATCH', `/api/machines/${machine.id}`, { autoStopMinutes: 30 })).json().autoStopMinutes, 30);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${second.id}`)).statusCode, 200);
    const destroyed = await suite.owner.call('PATCH', `/api/machines/${second.id}`, { autoStopMinutes: 5 });
    assert.equal(destroyed.statusCode, 409);
    assert.equal(destroyed.json().code, 'invalid_state');
  });

  test('the platform MCP tool machine_update changes autoStopMinutes as PATCH does', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'tooled', autoStopMinutes: 0 });
    const call = async (args: Record<string, unknown>) => {
      const response = await suite.ctx.app.inject({
        method: 'POST',
        url: '/api/mcp',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${suite.owner.key}` },
        payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'machine_update', arguments: args } },
      });
      assert.equal(response.statusCode, 200, response.body);
      return response.json().result as { isError?: boolean; structuredContent?: { autoStopMinutes: number } };
    };
    assert.equal((await call({ id: machine.id, autoStopMinutes: 10_081 })).isError, true);
    assert.equal((await call({ id: machine.id })).isError, true, 'nothing to change');
    assert.equal((await machineOf(machine.id)).autoStopMinutes, 0);
    assert.equal((await call({ id: machine.id, autoStopMinutes: 3 })).structuredContent?.autoStopMinutes, 3);
    assert.equal((await machineOf(machine.id)).autoStopMinutes, 3);
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
  });

  test('create refuses a bad autoStopMinutes with a 400 and makes nothing', async () => {
    const before = (await suite.owner.call('GET', '/api/machines?limit=100')).json().data.length;
    for (const autoStopMinutes of [-1, 10_081, 2.5, '15']) {
      const refused = await suite.owner.call('POST', '/api/machines', { name: 'bad', autoStopMinutes });
      assert.equal(refused.statusCode, 400, refused.body);
    }
    assert.equal((await suite.owner.call('GET', '/api/machines?limit=100')).json().data.length, before);
  });

  test('the stop is a compare-and-set on idleness: activity recorded after the check read the machine wins', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'raced', autoStopMinutes: 1 });
    const read = (await findMachineById(suite.ctx.app.deps.db, machine.id))!;
    // The check's guard as it would be a minute from now; the clock stays put, so that no idle job falls due and
    // runs the real check in the background (it would stop the machine before the activity below is recorded).
    const idleSince = read.last_active_at!;
    // Another process records activity between the check's read and its write.
    await recordActivity(suite.ctx.app.deps.db, machine.id, idleSince + SECOND);
    const lost = await inTransaction(suite.ctx.app.deps.database, (tx) => markStopping(suite.ctx.app.deps, tx, read, { action: 'stop', reason: 'idle' }, { idleSince }));
    assert.equal(lost, null);
    await workerPass(suite.ctx);
    assert.equal((await machineOf(machine.id)).status, 'running');
    await pass(70 * SECOND);
    assert.equal((await machineOf(machine.id)).status, 'stopped');
  });

  test('activity within a few seconds is written once, at the end of its window', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'chatty', autoStopMinutes: 1 });
    const writes: number[] = [];
    const lastActive = async () => (await findMachineById(suite.ctx.app.deps.db, machine.id))!.last_active_at;
    const start = suite.ctx.clock.now();
    for (let i = 0; i < 5; i++) {
      assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}/screenshot`)).statusCode, 200);
      writes.push((await lastActive())!);
      suite.ctx.clock.advance(SECOND);
    }
    assert.deepEqual(writes, [start, start, start, start, start], 'the first at once, the others held');
    suite.ctx.clock.advance(ACTIVITY_WRITE_MS);
    await suite.ctx.app.machineActivity.flush();
    assert.equal(await lastActive(), start + 4 * SECOND, 'the latest written at the window’s end');
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
  });

  test('the OpenAPI document describes PATCH /api/machines/{id} and autoStopMinutes in machine answers', async () => {
    const doc = (await suite.ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    const patch = doc.paths['/api/machines/{id}']?.patch;
    assert.ok(patch, 'the route is documented');
    const body = patch.requestBody.content['application/json'].schema;
    assert.deepEqual([body.properties.autoStopMinutes.minimum, body.properties.autoStopMinutes.maximum, body.additionalProperties, body.minProperties], [0, 10_080, false, 1]);
    assert.ok(Object.keys(patch.responses).includes('200') && Object.keys(patch.responses).some((code) => /^4/.test(code)));
    assert.match(JSON.stringify(patch.responses['200']), /autoStopMinutes/);
    const create = doc.paths['/api/machines'].post.requestBody.content['application/json'].schema;
    assert.equal(create.properties.autoStopMinutes.maximum, 10_080);
  });
});

test('activity held in its window when the service stops is written as it closes, before the database', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'activity-'));
  const database = await freshDatabase(join(dir, 'machines.sqlite'));
  const logs: string[] = [];
  const first = await createMachineTestApp({ database, logs });
  let machineId: string;
  let held: number;
  try {
    const owner = await newOwner(first);
    const machine = await runningMachine(first, owner, { name: 'closing' });
    machineId = machine.id;
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}/screenshot`)).statusCode, 200);
    first.clock.advance(SECOND);
    held = first.clock.now();
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}/screenshot`)).statusCode, 200);
  } finally {
    await first.close();
  }
  const second = await createMachineTestApp({ database });
  try {
    assert.equal((await findMachineById(second.app.deps.db, machineId))!.last_active_at, held, 'the held touch was written at close');
    assert.deepEqual(logs.filter((line) => line.includes('could not record')), []);
  } finally {
    await second.close();
    await database.drop();
    await rm(dir, { recursive: true, force: true });
  }
});

