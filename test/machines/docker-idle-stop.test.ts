import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { inTransaction } from '../../src/db/transaction.ts';
import { scheduleIdleCheck } from '../../src/machines/activity.ts';
import { containerName } from '../../src/machines/docker/container-spec.ts';
import { findMachineById } from '../../src/machines/machines.repository.ts';
import { dockerUnavailable, engine, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { eventsOf, type Owner } from '../support/machines.ts';

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
describe('idle stop on a real Docker engine', { skip, timeout: 300_000 }, () => {
  let app: DockerApp;
  let owner: Owner;

  before(async () => {
    app = await startDockerApp();
    ({ owner } = app);
  });
  after(async () => {
    await app?.close();
  });

  test('a machine idle for its autoStopMinutes is stopped (reason idle), its container stopped, though a background process runs', async () => {
    const created = await owner.call('POST', '/api/machines', { name: 'idle-docker', autoStopMinutes: 1 });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().id as string;
    await untilStatus(owner, id, 'running');
    const started = await owner.call('POST', `/api/machines/${id}/processes`, { command: 'while true; do date > /root/alive; sleep 1; done' });
    assert.equal(started.statusCode, 201, started.body);

    // Two minutes ago it started, and nobody has used it since; the process goes on.
    const { deps } = app.ctx.app;
    await app.ctx.app.machineActivity.flush();
    const past = deps.clock.now() - 2 * MINUTE;
    await deps.db.updateTable('machines').set({ status_changed_at: past, last_active_at: past }).where('id', '=', id).execute();
    const row = (await findMachineById(deps.db, id))!;
    await inTransaction(deps.database, (tx) => scheduleIdleCheck(deps, tx, row));

    await untilStatus(owner, id, 'stopped');
    const info = await engine().getContainer(containerName(id)).inspect();
    assert.equal(info.State.Running, false, 'the engine stopped the container');
    const stops = (await eventsOf(app.ctx, owner)).filter((event) => event.type === 'machine.stopped');
    assert.deepEqual(stops.map((event) => (event.data.detail as { reason: string }).reason), ['idle']);

    // Its disk is kept: started again, the process's file is there.
    assert.equal((await owner.call('POST', `/api/machines/${id}/start`)).statusCode, 200);
    await untilStatus(owner, id, 'running');
    const file = await owner.call('GET', `/api/machines/${id}/files?path=/root/alive`);
    assert.equal(file.statusCode, 200, file.body);
    assert.ok(file.body.length > 0);
    assert.equal((await owner.call('DELETE', `/api/machines/${id}`)).statusCode, 200);
  });
});
