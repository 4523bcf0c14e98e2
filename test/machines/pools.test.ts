import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { assertMachineEvent, eventCursor, finishBoot, machineSuite, newOwner } from '../support/machines.ts';

describe('warm pools', () => {
  const suite = machineSuite();

  const machinesOfPool = async (name: string) =>
    (await suite.owner.call('GET', '/api/machines?limit=100')).json().data.filter((m: { name: string }) => m.name.startsWith(`${name}-`));

  test('a pool boots its machines; POST /api/machines with pool claims one: machine.claimed, and a replacement boots', async () => {
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const created = await suite.owner.call('POST', '/api/pools', { name: 'warm', size: 'large', count: 2 });
    assert.equal(created.statusCode, 201);
    const pool = created.json();
    assert.match(pool.id, /^pool_[0-9a-z]{26}$/);
    assert.deepEqual({ ...pool, id: undefined, createdAt: undefined }, { id: undefined, name: 'warm', size: 'large', count: 2, ready: 0, template: null, createdAt: undefined });

    const booting = await machinesOfPool('warm');
    assert.equal(booting.length, 2);
    assert.ok(booting.every((m: { status: string; size: string }) => m.status === 'starting' && m.size === 'large'));
    await finishBoot(suite.ctx);
    assert.deepEqual((await events()).map((e) => e.type), ['machine.created', 'machine.created'], 'pooled machines are created and booted too');
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 2);

    const claim = await suite.owner.call('POST', '/api/machines', { name: 'claimed-one', pool: 'warm', externalId: 'ticket-9', labels: { who: 'me' } });
    assert.equal(claim.statusCode, 201);
    const machine = claim.json();
    assert.ok(booting.some((m: { id: string }) => m.id === machine.id), 'one of the warm machines');
    assert.equal(machine.status, 'running', 'already booted');
    assert.equal(machine.name, 'claimed-one');
    assert.equal(machine.size, 'large');
    assert.match(machine.mcpToken, /^tmm_/);
    const [claimed, ...rest] = await events();
    assertMachineEvent(claimed, 'machine.claimed', { ...machine }, 'running', { pool: { id: pool.id, name: 'warm' } }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 1);
    const replacement = (await machinesOfPool('warm')).filter((m: { id: string }) => !booting.some((b: { id: string }) => b.id === m.id));
    assert.equal(replacement.length, 1, 'a replacement is booting');
    await finishBoot(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 2);
    assert.deepEqual((await events()).map((e) => e.type), ['machine.created']);

    const byId = await suite.owner.call('POST', '/api/machines', { name: 'claimed-two', pool: pool.id });
    assert.equal(byId.statusCode, 201, 'the pool can be named by id');
    assert.equal((await events())[0]!.type, 'machine.claimed');
    const token = byId.json().mcpToken;
    const live = await suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${byId.json().id}/live-view`, headers: { authorization: `Bearer ${token}` } });
    assert.equal(live.statusCode, 201, "the claimed machine's token works");
    await finishBoot(suite.ctx);
  });

  test('a machine still booting in the pool can be claimed; machine.created follows its boot', async () => {
    const pool = (await suite.owner.call('POST', '/api/pools', { name: 'cold', size: 'small', count: 1 })).json();
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const claim = await suite.owner.call('POST', '/api/machines', { name: 'impatient', pool: 'cold' });
    assert.equal(claim.statusCode, 201);
    assert.equal(claim.json().status, 'starting');
    const machine = claim.json();
    const [claimed] = await events();
    assertMachineEvent(claimed, 'machine.claimed', machine, 'starting', { pool: { id: pool.id, name: 'cold' } }, suite.ctx.clock.now());
    await finishBoot(suite.ctx);
    const fresh = await events();
    const own = fresh.find((e) => (e.data.machine as { id: string }).id === machine.id);
    assertMachineEvent(own, 'machine.created', machine, 'running', {}, suite.ctx.clock.now());
  });

  test('pool errors: validation 400, duplicate name 409, unknown pool 404, size mismatch 400, empty pool 409', async () => {
    for (const payload of [{ name: 'p', size: 'small' }, { name: 'p', size: 'small', count: 21 }, { name: 'p', size: 'small', count: -1 }, { name: 'p', size: 'tiny', count: 1 }, { name: ' ', size: 'small', count: 1 }, { name: 'p', size: 'small', count: 1, extra: 1 }]) {
      const response = await suite.owner.call('POST', '/api/pools', payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
    }
    assert.equal((await suite.owner.call('POST', '/api/pools', { name: 'empty', size: 'small', count: 0 })).statusCode, 201);
    const duplicate = await suite.owner.call('POST', '/api/pools', { name: 'empty', size: 'small', count: 0 });
    assert.equal(duplicate.statusCode, 409);

    const unknown = await suite.owner.call('POST', '/api/machines', { name: 'x', pool: 'nope' });
    assert.equal(unknown.statusCode, 404);
    const mismatch = await suite.owner.call('POST', '/api/machines', { name: 'x', pool: 'warm', size: 'small' });
    assert.equal(mismatch.statusCode, 400);
    const empty = await suite.owner.call('POST', '/api/machines', { name: 'x', pool: 'empty' });
    assert.equal(empty.statusCode, 409);
    assert.equal(empty.json().code, 'pool_empty');

    const stranger = await newOwner(suite.ctx);
    const pools = (await suite.owner.call('GET', '/api/pools')).json().data;
    const warm = pools.find((p: { name: string }) => p.name === 'warm');
    assert.equal((await stranger.call('GET', `/api/pools/${warm.id}`)).statusCode, 404);
    assert.equal((await stranger.call('PATCH', `/api/pools/${warm.id}`, { count: 0 })).statusCode, 404);
    assert.equal((await stranger.call('DELETE', `/api/pools/${warm.id}`)).statusCode, 404);
    assert.equal((await stranger.call('POST', '/api/machines', { name: 'x', pool: warm.id })).statusCode, 404, "another account's pool");
    assert.deepEqual((await stranger.call('GET', '/api/pools')).json(), { data: [], nextCursor: null });
  });

  test('resizing a pool boots more or destroys the surplus; deleting it destroys its unclaimed machines only', async () => {
    const pool = (await suite.owner.call('POST', '/api/pools', { name: 'elastic', size: 'small', count: 1 })).json();
    await finishBoot(suite.ctx);
    const claimed = (await suite.owner.call('POST', '/api/machines', { name: 'keeper', pool: 'elastic' })).json();
    await finishBoot(suite.ctx);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    const grown = await suite.owner.call('PATCH', `/api/pools/${pool.id}`, { count: 3 });
    assert.equal(grown.statusCode, 200);
    assert.equal(grown.json().count, 3);
    await finishBoot(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 3);
    assert.deepEqual((await events()).map((e) => e.type), ['machine.created', 'machine.created']);

    const shrunk = await suite.owner.call('PATCH', `/api/pools/${pool.id}`, { count: 1 });
    assert.equal(shrunk.json().ready, 1);
    const surplus = await events();
    assert.deepEqual(surplus.map((e) => [e.type, e.data.detail]), [
      ['machine.destroyed', { reason: 'pool' }],
      ['machine.destroyed', { reason: 'pool' }],
    ]);

    assert.equal((await suite.owner.call('DELETE', `/api/pools/${pool.id}`)).statusCode, 204);
    assert.deepEqual((await events()).map((e) => e.type), ['machine.destroyed']);
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).statusCode, 404);
    assert.equal((await suite.owner.call('GET', `/api/machines/${claimed.id}`)).json().status, 'running', 'the claimed machine is not touched');
    assert.equal((await suite.owner.call('DELETE', `/api/pools/${pool.id}`)).statusCode, 404);
  });

  test('concurrent claims get different machines', async () => {
    await suite.owner.call('POST', '/api/pools', { name: 'race', size: 'small', count: 2 });
    await finishBoot(suite.ctx);
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const claims = await Promise.all([1, 2, 3].map((n) => suite.owner.call('POST', '/api/machines', { name: `racer-${n}`, pool: 'race' })));
    assert.deepEqual(claims.map((c) => c.statusCode), [201, 201, 201], 'each claim boots a replacement, so a third one finds a machine too');
    const ids = new Set(claims.map((c) => c.json().id));
    assert.equal(ids.size, 3);
    const claimed = (await events()).filter((e) => e.type === 'machine.claimed');
    assert.deepEqual(new Set(claimed.map((e) => (e.data.machine as { id: string }).id)), ids);
    await finishBoot(suite.ctx);
  });

  test('the worker refills a pool whose machine stopped', async () => {
    const pool = (await suite.owner.call('POST', '/api/pools', { name: 'refill', size: 'small', count: 1 })).json();
    await finishBoot(suite.ctx);
    const [machine] = await machinesOfPool('refill');
    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 0);
    await suite.ctx.app.jobs.drain();
    await finishBoot(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/pools/${pool.id}`)).json().ready, 1);
    const claim = await suite.owner.call('POST', '/api/machines', { name: 'after-refill', pool: 'refill' });
    assert.notEqual(claim.json().id, machine.id, 'the stopped machine left the pool');
    await finishBoot(suite.ctx);
  });
});
