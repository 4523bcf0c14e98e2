import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { inTransaction } from '../../src/db/transaction.ts';
import { scheduleIdleCheck } from '../../src/machines/activity.ts';
import { containerName } from '../../src/providers/docker/container-spec.ts';
import { findMachineById } from '../../src/machines/machines.repository.ts';
import { dockerSuite, dockerUnavailable, engine, untilStatus } from '../support/docker.ts';
import { eventsOf } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();
const MINUTE = 60_000;

/**
 * Idle stop (CONTRACT 20) against a real Docker engine: an idle machine is
 * really stopped (its container no longer runs, its disk kept), even with a
 * background process running in it: that alone is not activity. The engine's
 * time is real, so instead of waiting a real minute the machine's record is
 * moved a few minutes into the past (its start and its last activity), which
 * is all the idle check reads.
 */
describe('idle stop on a real Docker engine', { skip, timeout: 900_000 }, () => {
  const suite = dockerSuite();

  test('a machine idle for its autoStopMinutes is stopped (reason idle), its container stopped, though a background process runs', async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'idle-docker', autoStopMinutes: 1 });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().id as string;
    await untilStatus(suite.owner, id, 'running', 180_000);
    const started = await suite.owner.call('POST', `/api/machines/${id}/processes`, { command: 'while true; do date > /root/alive; sleep 1; done' });
    assert.equal(started.statusCode, 201, started.body);

    // Two minutes ago it started, and nobody has used it since; the process goes on.
    const { deps } = suite.ctx.app;
    await suite.ctx.app.machineActivity.flush();
    const past = deps.clock.now() - 2 * MINUTE;
    await deps.db.updateTable('machines').set({ status_changed_at: past, last_active_at: past }).where('id', '=', id).execute();
    // Looking at the list of its processes (as an open dashboard page does while one runs) is not using it.
    assert.equal((await suite.owner.call('GET', `/api/machines/${id}/processes`)).statusCode, 200);
    await suite.ctx.app.machineActivity.flush();
    const row = (await findMachineById(deps.db, id))!;
    assert.equal(row.last_active_at, past);
    await inTransaction(deps.database, (tx) => scheduleIdleCheck(deps, tx, row));

    await untilStatus(suite.owner, id, 'stopped', 180_000);
    const info = await engine().getContainer(containerName(id)).inspect();
    assert.equal(info.State.Running, false, 'the engine stopped the container');
    const stops = (await eventsOf(suite.ctx, suite.owner)).filter((event) => event.type === 'machine.stopped' && (event.data.machine as { id: string }).id === id);
    assert.deepEqual(stops.map((event) => (event.data.detail as { reason: string }).reason), ['idle']);

    // Its disk is kept: started again, the process's file is there.
    assert.equal((await suite.owner.call('POST', `/api/machines/${id}/start`)).statusCode, 200);
    await untilStatus(suite.owner, id, 'running', 180_000);
    const file = await suite.owner.call('GET', `/api/machines/${id}/files?path=/root/alive`);
    assert.equal(file.statusCode, 200, file.body);
    assert.ok(file.body.length > 0);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${id}`)).statusCode, 200);
  });

  test("a preview's requests and a terminal's keystrokes are activity: they move the machine's last activity and keep it up", async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'used-docker', autoStopMinutes: 1 });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().id as string;
    await untilStatus(suite.owner, id, 'running', 180_000);
    assert.equal((await suite.owner.call('POST', `/api/machines/${id}/processes`, { command: 'cd /root && exec python3 -m http.server 8000' })).statusCode, 201);
    const settings = (await suite.owner.call('GET', `/api/machines/${id}/previews`)).json() as { previewToken: string; urlTemplate: string };
    const host = new URL(settings.urlTemplate.replace('{port}', '8000')).host;
    const { deps } = suite.ctx.app;
    const activity = suite.ctx.app.machineActivity;
    /** Its record moved two minutes into the past: idle for longer than its minute, as far as the row says. */
    const idleForTwoMinutes = async () => {
      await activity.flush();
      const past = deps.clock.now() - 2 * MINUTE;
      await deps.db.updateTable('machines').set({ status_changed_at: past, last_active_at: past }).where('id', '=', id).execute();
      return past;
    };
    const lastActive = async () => {
      await activity.flush();
      return (await findMachineById(deps.db, id))!.last_active_at!;
    };

    const preview = () => suite.ctx.app.inject({ method: 'GET', url: '/', headers: { host, 'x-preview-token': settings.previewToken } });
    await eventually(async () => ((await preview()).statusCode === 200 ? true : undefined), 30_000, 'the machine’s server answering');
    let past = await idleForTwoMinutes();
    // The window of the touches above is over (or written by flush): the next touch writes at once.
    const before = deps.clock.now();
    assert.equal((await preview()).statusCode, 200);
    assert.ok((await lastActive()) >= before, 'a preview request is activity');
    await inTransaction(deps.database, async (tx) => scheduleIdleCheck(deps, tx, (await findMachineById(tx.db, id))!));

    past = await idleForTwoMinutes();
    const port = (await suite.ctx.app.listen({ port: 0, host: '127.0.0.1' })).split(':').pop();
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/machines/${id}/terminal`, { headers: { authorization: `Bearer ${suite.owner.key}` } } as unknown as string[]);
    socket.binaryType = 'arraybuffer';
    let output = '';
    socket.addEventListener('message', (event) => {
      if (typeof event.data !== 'string') output += Buffer.from(event.data as ArrayBuffer).toString('utf8');
    });
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve);
      socket.addEventListener('error', reject);
    });
    socket.send(new TextEncoder().encode('echo typed-$((6*7))\n'));
    await eventually(async () => (output.includes('typed-42') ? true : undefined), 30_000, 'the terminal answering');
    assert.ok((await lastActive()) > past, 'terminal traffic is activity');
    socket.close();

    // Checked now, with the activity just recorded: not idle, still running.
    await inTransaction(deps.database, async (tx) => scheduleIdleCheck(deps, tx, (await findMachineById(tx.db, id))!));
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.equal((await suite.owner.call('GET', `/api/machines/${id}`)).json().status, 'running');
    assert.deepEqual((await eventsOf(suite.ctx, suite.owner)).filter((event) => event.type === 'machine.stopped' && (event.data.machine as { id: string }).id === id), []);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${id}`)).statusCode, 200);
  });
});
