import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { meteringPass } from '../../src/billing/metering.ts';
import { idBoundAt } from '../../src/shared/ids.ts';
import type { TestContext } from '../support/app.ts';
import { onPostgres } from '../support/database.ts';
import { createMachine, finishBoot, newOwner, workerPass, type Owner } from '../support/machines.ts';
import { assertChargedExactly, createBillingTestApp, ledgerOf, saveCard, topUp } from './helpers.ts';

const MINUTE = 60_000;
/** 0.013 USD/h: 216.67 µ$ a minute, so rounding each minute's charge would drift (217 × 90 = 19,530 instead of 19,500). */
const SMALL_PRICE = 13_000;
const ENV = { MACHINE_PRICES: 'small=0.013,medium=0.10,large=0.20', METERING_INTERVAL: '60s' };

async function fundedOwner(ctx: TestContext, amount = '100.00'): Promise<Owner> {
  const owner = await newOwner(ctx);
  await saveCard(owner);
  assert.equal((await topUp(ctx, owner, amount)).statusCode, 201);
  return owner;
}

/** Ledger inserts fail while it is installed: a metering pass dies in the middle of its transaction, as if its process were killed there. */
async function breakLedger(ctx: TestContext): Promise<() => Promise<void>> {
  const db = ctx.app.deps.db;
  if (onPostgres) {
    await sql`create function crash_ledger() returns trigger language plpgsql as $$ begin raise exception 'process killed'; end $$`.execute(db);
    await sql`create trigger crash_ledger before insert on billing_ledger for each row execute function crash_ledger()`.execute(db);
    return async () => {
      await sql`drop trigger crash_ledger on billing_ledger`.execute(db);
      await sql`drop function crash_ledger()`.execute(db);
    };
  }
  await sql`create trigger crash_ledger before insert on billing_ledger begin select raise(abort, 'process killed'); end`.execute(db);
  return async () => void (await sql`drop trigger crash_ledger`.execute(db));
}

describe('metering (CONTRACT 12)', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createBillingTestApp({ env: ENV });
  });
  after(() => ctx.close());

  const meterOf = (machineId: string) => ctx.app.deps.db.selectFrom('billing_meters').selectAll().where('machine_id', '=', machineId).executeTakeFirstOrThrow();

  test('90 minutes of running at a known price is charged exactly that, across a metering pass killed in the middle', async () => {
    const owner = await fundedOwner(ctx);
    const machine = await createMachine(owner, { name: 'ninety', size: 'small' });
    await finishBoot(ctx);
    const startedAt = ctx.clock.now();
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');

    for (let minute = 1; minute <= 45; minute++) {
      ctx.clock.advance(MINUTE);
      await workerPass(ctx);
    }
    const beforeCrash = await meterOf(machine.id);
    assert.equal(beforeCrash.metered_until, startedAt + 45 * MINUTE, 'charged every interval');
    const entriesBefore = (await ledgerOf(ctx, owner.user.id)).length;

    const repair = await breakLedger(ctx);
    ctx.clock.advance(MINUTE);
    await workerPass(ctx);
    assert.deepEqual(await meterOf(machine.id), beforeCrash, 'the killed pass left the watermark where it was');
    assert.equal((await ledgerOf(ctx, owner.user.id)).length, entriesBefore, 'and no entry');
    await repair();

    // The pass runs again (its job is retried) and charges from the watermark: the killed minute is not lost.
    for (let minute = 47; minute <= 89; minute++) {
      ctx.clock.advance(MINUTE);
      await workerPass(ctx);
    }
    ctx.clock.advance(MINUTE - 250);
    await workerPass(ctx);
    ctx.clock.advance(250);
    assert.equal((await owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    const stoppedAt = ctx.clock.now();
    assert.equal(stoppedAt - startedAt, 90 * MINUTE);
    await workerPass(ctx);

    const entries = await assertChargedExactly(ctx, machine.id, startedAt, stoppedAt, SMALL_PRICE);
    assert.ok(entries >= 88, `charged at least every interval (${entries} entries)`);
    const total = -(await ledgerOf(ctx, owner.user.id)).filter((e) => e.kind === 'usage').reduce((sum, e) => sum + e.amount_micros, 0);
    assert.equal(total, 19_500, '90 minutes at 0.013 USD/h is 0.019500 USD');
    assert.equal((await meterOf(machine.id)).metered_until, null, 'no meter runs for a stopped machine');

    // Stopped time is free; a second run continues the machine's totals (still rounded once over its life).
    ctx.clock.advance(30 * MINUTE);
    await workerPass(ctx);
    assert.equal((await ledgerOf(ctx, owner.user.id)).filter((e) => e.kind === 'usage').length, entries, 'nothing charged while stopped');
    assert.equal((await owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
    await finishBoot(ctx);
    const restartedAt = ctx.clock.now();
    ctx.clock.advance(7_777);
    await owner.call('POST', `/api/machines/${machine.id}/stop`);
    const meter = await meterOf(machine.id);
    assert.equal(meter.metered_ms, 90 * MINUTE + (ctx.clock.now() - restartedAt));
    assert.equal(meter.charged_micros, Math.ceil(((90 * MINUTE + 7_777) * SMALL_PRICE) / 3_600_000));
  });

  test('usage: per machine, the time and amount charged in a period; transactions show the periods', async () => {
    const owner = await fundedOwner(ctx);
    const a = await createMachine(owner, { name: 'usage-a', size: 'small' });
    const b = await createMachine(owner, { name: 'usage-b', size: 'large' });
    await finishBoot(ctx);
    const from = new Date(ctx.clock.now()).toISOString();
    ctx.clock.advance(10 * MINUTE);
    await workerPass(ctx);
    await owner.call('POST', `/api/machines/${a.id}/stop`);
    await owner.call('POST', `/api/machines/${b.id}/stop`);
    const usage = await owner.call('GET', `/api/billing/usage?from=${encodeURIComponent(new Date(Date.parse(from) - 1).toISOString())}`);
    assert.equal(usage.statusCode, 200, usage.body);
    const body = usage.json();
    assert.equal(body.to, new Date(ctx.clock.now()).toISOString());
    const byName = Object.fromEntries(body.machines.map((m: { name: string }) => [m.name, m]));
    assert.deepEqual(byName['usage-a'], { machineId: a.id, name: 'usage-a', size: 'small', seconds: 600, amount: '0.002167' });
    assert.deepEqual(byName['usage-b'], { machineId: b.id, name: 'usage-b', size: 'large', seconds: 600, amount: '0.033334' });
    assert.equal(body.total, '0.035501');
    const txns = (await owner.call('GET', '/api/billing/transactions')).json().data;
    const usageEntry = txns.find((t: { kind: string; machineId: string }) => t.kind === 'usage' && t.machineId === a.id);
    assert.equal(usageEntry.periodEnd, new Date(Date.parse(from) + 10 * MINUTE).toISOString());
    assert.match(usageEntry.amount, /^-0\.\d{6}$/);
    const later = await owner.call('GET', `/api/billing/usage?from=${encodeURIComponent(new Date(ctx.clock.now()).toISOString())}`);
    assert.deepEqual(later.json().machines, []);
    assert.equal(later.json().total, '0.000000');
    assert.equal((await owner.call('GET', '/api/billing/usage?from=yesterday')).statusCode, 400);
    assert.equal((await owner.call('GET', `/api/billing/usage?from=${encodeURIComponent(new Date(ctx.clock.now() + 1).toISOString())}`)).statusCode, 400, 'from after to');
  });

  test('a new ledger entry sorts after the account\'s newest, even one written by a process whose clock was ahead', async () => {
    const owner = await fundedOwner(ctx);
    const db = ctx.app.deps.db;
    const { balance_micros: balance } = await db.selectFrom('billing_accounts').select('balance_micros').where('account_id', '=', owner.user.id).executeTakeFirstOrThrow();
    // Another process, its clock a minute ahead (or its time taken after ours, while we waited for the lock), charged the account.
    const ahead = ctx.clock.now() + MINUTE;
    await db
      .insertInto('billing_ledger')
      .values({ id: idBoundAt('txn', ahead), account_id: owner.user.id, kind: 'usage', amount_micros: -1_000, balance_after_micros: balance - 1_000, machine_id: null, period_start: null, period_end: null, created_at: ahead })
      .execute();
    await db.updateTable('billing_accounts').set({ balance_micros: balance - 1_000 }).where('account_id', '=', owner.user.id).execute();

    const topped = (await topUp(ctx, owner, '5.00')).json();
    assert.equal(topped.balanceAfter, ((balance - 1_000 + 5_000_000) / 1_000_000).toFixed(6));
    const listed = (await owner.call('GET', '/api/billing/transactions')).json().data as Array<{ id: string; amount: string; balanceAfter: string }>;
    assert.equal(listed[0]!.id, topped.id, 'newest first is the entry applied last');
    for (let i = 0; i + 1 < listed.length; i++) {
      const after = Math.round(Number(listed[i]!.balanceAfter) * 1_000_000);
      const before = Math.round(Number(listed[i + 1]!.balanceAfter) * 1_000_000);
      assert.equal(after - before, Math.round(Number(listed[i]!.amount) * 1_000_000), `entry ${i} follows the one listed after it`);
    }
  });
});

// SQLite: two connections in one Node process cannot wait for each other (the busy wait blocks the event loop both need);
// test/billing/crash.test.ts runs real processes on a SQLite file.
describe('metering by two processes on one PostgreSQL database', { skip: !onPostgres && 'PostgreSQL: two connections at once in one process' }, () => {
  let first: TestContext;
  let second: TestContext;
  before(async () => {
    first = await createBillingTestApp({ env: ENV });
    second = await createBillingTestApp({ env: ENV, database: first.database, smtp: first.smtp });
  });
  after(async () => {
    await second.close();
    await first.close();
  });

  test('both charging the same account at once (passes and stops interleaved) never charge a second twice', async () => {
    const owner = await fundedOwner(first, '500.00');
    const machines = [];
    for (let i = 0; i < 6; i++) machines.push(await createMachine(owner, { name: `shared-${i}`, size: i % 2 ? 'large' : 'small' }));
    await finishBoot(first);
    const startedAt = first.clock.now();
    second.clock.set(startedAt);
    const stoppedAt = new Map<string, number>();
    for (let round = 1; round <= 12; round++) {
      const step = 13_000 + round * 997;
      first.clock.advance(step);
      second.clock.advance(step);
      const now = first.clock.now();
      const work: Array<() => Promise<unknown>> = [() => meteringPass(first.app.deps, now), () => meteringPass(second.app.deps, now), () => meteringPass(second.app.deps, now)];
      // Every other round a machine stops, through one process or the other, while both passes run.
      if (round % 2 === 0) {
        const machine = machines[round / 2 - 1]!;
        const via = round % 4 === 0 ? second : first;
        work.push(() => via.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/stop`, headers: { authorization: `Bearer ${owner.key}` } }).then((r) => assert.equal(r.statusCode, 200, r.body)));
        stoppedAt.set(machine.id, now);
      }
      await Promise.all(work.map((run) => run()));
    }
    for (const machine of machines) {
      const price = machine.size === 'large' ? 200_000 : SMALL_PRICE;
      await assertChargedExactly(first, machine.id, startedAt, stoppedAt.get(machine.id)!, price);
    }
    const ledger = await ledgerOf(first, owner.user.id);
    let balance = 0;
    for (const entry of ledger) {
      balance += entry.amount_micros;
      assert.equal(entry.balance_after_micros, balance, 'each entry carries the balance after it, in order');
    }
    const row = await first.app.deps.db.selectFrom('billing_accounts').select('balance_micros').where('account_id', '=', owner.user.id).executeTakeFirstOrThrow();
    assert.equal(row.balance_micros, balance, 'the balance is the sum of the ledger');
  });
});
