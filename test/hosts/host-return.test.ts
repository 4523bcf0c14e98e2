import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { drainHost } from '../../src/hosts/hosts.admin.ts';
import { findHost, insertHost, setHostState } from '../../src/hosts/hosts.repository.ts';
import { newHostRow, watchHostsOnce } from '../../src/hosts/hosts.service.ts';
import type { MachineProvider } from '../../src/providers/provider.ts';
import type { TestContext } from '../support/app.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { loseHost, recoverHost } from '../../src/machines/host-loss.ts';
import { markError } from '../../src/machines/machine-transitions.ts';
import { findMachineById } from '../../src/machines/machines.repository.ts';
import { LOCAL_HOST } from '../../src/providers/provider.ts';
import { createMachineTestApp, eventsOf, newOwner, runningMachine } from '../support/machines.ts';

/** A provider with hosts whose engines answer or not as the test says. */
function hostsAnswering(answering: Map<string, boolean>): MachineProvider {
  const capacity = { cpus: 2, memoryBytes: 2 ** 31, diskBytes: null };
  return {
    hosts: {
      probe: async () => capacity,
      attach: async () => capacity,
      ping: async (name: string) => answering.get(name) ?? false,
      attached: () => [...answering.keys()],
      capacityOf: () => capacity,
    },
  } as unknown as MachineProvider;
}

/** CONTRACT 21: a lost host that answers again returns to what the operator left it. */
describe('a lost host back', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createMachineTestApp({ env: { MACHINE_HOST_LOST_AFTER_MS: '1000' } });
  });
  after(() => ctx.close());

  const stateOf = async (name: string) => (await findHost(ctx.app.deps.db, name))?.state;

  test('regression: a draining host lost and back was made active (taking new machines); it is draining again, an active one active, and each is back once', async () => {
    const { db } = ctx.app.deps;
    const now = ctx.clock.now();
    for (const name of ['drained-one', 'active-one']) await insertHost(db, { ...newHostRow(name, 'unix:///nowhere.sock', now), cpus: 2, memory_bytes: 2 ** 31, last_seen_at: now });
    await drainHost(db, 'drained-one', now);
    const answering = new Map([['drained-one', false], ['active-one', false]]);
    const provider = hostsAnswering(answering);

    ctx.clock.advance(2000);
    const { silent } = await watchHostsOnce(ctx.app.deps, provider);
    assert.deepEqual(silent.map((host) => host.name).sort(), ['active-one', 'drained-one']);
    for (const host of silent) assert.ok(await setHostState(db, host.name, 'lost', ctx.clock.now()));

    answering.set('drained-one', true).set('active-one', true);
    const { back } = await watchHostsOnce(ctx.app.deps, provider);
    assert.deepEqual(back.sort(), ['active-one', 'drained-one']);
    assert.equal(await stateOf('drained-one'), 'draining');
    assert.equal(await stateOf('active-one'), 'active');
    assert.deepEqual((await watchHostsOnce(ctx.app.deps, provider)).back, [], 'back once');
  });

  test('a host drained while it is lost is draining when it answers again', async () => {
    const { db } = ctx.app.deps;
    const now = ctx.clock.now();
    await insertHost(db, { ...newHostRow('drained-while-lost', 'unix:///nowhere.sock', now), state: 'lost', cpus: 2, memory_bytes: 2 ** 31 });
    await drainHost(db, 'drained-while-lost', now);
    // Still silent: lost again (drainHost made it draining), and still drained.
    assert.ok(await setHostState(db, 'drained-while-lost', 'lost', now));
    const { back } = await watchHostsOnce(ctx.app.deps, hostsAnswering(new Map([['drained-while-lost', true]])));
    assert.deepEqual(back, ['drained-while-lost']);
    assert.equal(await stateOf('drained-while-lost'), 'draining');
  });

  test('a host back recovers the machines it took down, and only those: a machine in error for another reason stays so; meanwhile a start is refused', async () => {
    const { db } = ctx.app.deps;
    const owner = await newOwner(ctx);
    await insertHost(db, { ...newHostRow(LOCAL_HOST, 'unix:///nowhere.sock', ctx.clock.now()), cpus: 2, memory_bytes: 2 ** 31 });
    const crashed = await runningMachine(ctx, owner, { name: 'crashed' });
    const taken = await runningMachine(ctx, owner, { name: 'taken-down' });
    const crashedRow = (await findMachineById(db, crashed.id))!;
    await inTransaction(ctx.app.deps.database, (tx) => markError(ctx.app.deps, tx, crashedRow, 'crash', 'It crashed.'));
    assert.equal(await loseHost(ctx.app.deps, LOCAL_HOST), 1, 'the running one only');
    assert.deepEqual([(await findMachineById(db, taken.id))!.lost_with_host, (await findMachineById(db, crashed.id))!.lost_with_host], [1, 0]);

    // Its disk is on the lost host: a start is refused plainly (the host unnamed), and changes nothing.
    const refused = await owner.call('POST', `/api/machines/${taken.id}/start`);
    assert.equal(refused.statusCode, 409, refused.body);
    assert.deepEqual([refused.json().code, /host is not answering/.test(refused.json().detail), /\blocal\b/.test(refused.json().detail)], ['invalid_state', true, false]);
    assert.equal((await findMachineById(db, taken.id))!.status, 'error');

    // The simulated machines run on: the host's answer is that the one taken down runs.
    await recoverHost(ctx.app.deps, ctx.app.machineProvider, LOCAL_HOST);
    assert.equal((await findMachineById(db, taken.id))!.status, 'running');
    assert.equal((await findMachineById(db, taken.id))!.lost_with_host, 0);
    assert.equal((await findMachineById(db, crashed.id))!.status, 'error', 'the crash is not undone by a host coming back');
    const started = (await eventsOf(ctx, owner)).filter((event) => event.type === 'machine.started');
    assert.deepEqual(started.map((event) => [(event.data.machine as { id: string }).id, (event.data.detail as { reason?: string }).reason]), [[taken.id, 'host-back']]);
    // Again: nothing more to do, no second event.
    await recoverHost(ctx.app.deps, ctx.app.machineProvider, LOCAL_HOST);
    assert.equal((await eventsOf(ctx, owner)).filter((event) => event.type === 'machine.started').length, 1);
  });
});
