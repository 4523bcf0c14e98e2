import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { carriedTotals } from '../../src/billing/metering.ts';
import { costOf } from '../../src/billing/money.ts';
import type { TestContext } from '../support/app.ts';
import { createMachine, finishBoot, newOwner, workerPass, type Owner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { createBillingTestApp, ledgerOf, saveCard, topUp } from './helpers.ts';

const MINUTE = 60_000;
/** 0.013 USD/h running, 0.0013 paused: fractions of a micro-dollar every minute, so rounding per period would show. */
const RUNNING = 13_000;
const PAUSED = 1_300;

async function fundedOwner(ctx: TestContext): Promise<Owner> {
  const owner = await newOwner(ctx);
  await saveCard(owner);
  assert.equal((await topUp(ctx, owner, '100.00')).statusCode, 201);
  return owner;
}

/** Minutes of the injected clock, a worker pass (a metering pass among what falls due) after each. */
async function spend(ctx: TestContext, minutes: number): Promise<void> {
  for (let minute = 0; minute < minutes; minute++) {
    ctx.clock.advance(MINUTE);
    await workerPass(ctx);
  }
}

/**
 * CONTRACT 20: paused time is metered at the paused price (MACHINE_PRICES
 * `size=running/paused`), running time at the running price, the periods
 * joined end to end and the total rounded up once over the machine's life.
 */
describe('metering of paused time (CONTRACT 20)', () => {
  for (const [label, prices, paused] of [
    ['size=running/paused', 'small=0.013/0.0013,medium=0.10,large=0.20', PAUSED],
    ['size=running (paused a tenth)', 'small=0.013,medium=0.10,large=0.20', PAUSED],
    ['a paused price of zero', 'small=0.013/0,medium=0.10,large=0.20', 0],
  ] as const) {
    describe(label, () => {
      let ctx: TestContext;
      before(async () => {
        ctx = await createBillingTestApp({ env: { MACHINE_PRICES: prices, METERING_INTERVAL: '60s' } });
      });
      after(() => ctx.close());

      test('17 minutes running, 45 paused, 13 running: charged each at its price, once rounded', async () => {
        const owner = await fundedOwner(ctx);
        const machine = await createMachine(owner, { name: 'thrifty', size: 'small' });
        await finishBoot(ctx);
        const startedAt = ctx.clock.now();
        await spend(ctx, 17);
        assert.equal((await owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
        await spend(ctx, 45);
        assert.equal((await owner.call('POST', `/api/machines/${machine.id}/resume`)).statusCode, 200);
        await spend(ctx, 13);
        assert.equal((await owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
        const stoppedAt = ctx.clock.now();
        await spend(ctx, 5);

        const entries = (await ledgerOf(ctx, owner.user.id)).filter((entry) => entry.kind === 'usage');
        entries.sort((a, b) => a.period_start! - b.period_start!);
        assert.equal(entries[0]!.period_start, startedAt);
        // Free time has no entries: at a paused price of zero, the pause is the one gap.
        const gaps = entries.slice(1).map((entry, i) => entry.period_start! - entries[i]!.period_end!).filter((gap) => gap !== 0);
        assert.deepEqual(gaps, paused === 0 ? [45 * MINUTE] : [], 'the periods join end to end');
        assert.equal(entries.at(-1)!.period_end, stoppedAt, 'nothing after the stop');
        const charged = -entries.reduce((sum, entry) => sum + entry.amount_micros, 0);
        // The exact price-weighted time, rounded up once: not ceil per period, not the running price for all of it.
        // At a paused price of zero nothing carries over the pause: each running period is rounded up on its own.
        const exact = paused === 0
          ? costOf(17 * MINUTE, RUNNING) + costOf(13 * MINUTE, RUNNING)
          : Number((BigInt(30 * MINUTE) * BigInt(RUNNING) + BigInt(45 * MINUTE) * BigInt(paused) + 3_599_999n) / 3_600_000n);
        assert.equal(charged, exact, `30 min at ${RUNNING} µ$/h and 45 at ${paused}`);
        assert.ok(charged < costOf(75 * MINUTE, RUNNING), 'paused time is cheaper');

        const usage = (await owner.call('GET', `/api/billing/usage?from=${new Date(startedAt - MINUTE).toISOString()}&to=${new Date(stoppedAt + MINUTE).toISOString()}`)).json();
        const line = usage.machines.find((row: { machineId: string }) => row.machineId === machine.id);
        assert.equal(line.seconds, (paused === 0 ? 30 : 75) * 60, 'usage counts the paused time too, when it costs anything');
      });
    });
  }

  test('carriedTotals: a move between prices keeps what was charged and never makes the next charge negative', () => {
    assert.deepEqual(carriedTotals(undefined, RUNNING), { metered_ms: 0, charged_micros: 0 });
    assert.deepEqual(carriedTotals({ price_micros: RUNNING, metered_ms: 1000, charged_micros: 4 }, RUNNING), { metered_ms: 1000, charged_micros: 4 });
    const moved = carriedTotals({ price_micros: RUNNING, metered_ms: 17 * MINUTE, charged_micros: costOf(17 * MINUTE, RUNNING) }, PAUSED);
    assert.equal(moved.metered_ms, 170 * MINUTE, 'ten times the time at a tenth of the price');
    assert.ok(costOf(moved.metered_ms, PAUSED) <= moved.charged_micros);
    assert.deepEqual(carriedTotals({ price_micros: RUNNING, metered_ms: 1000, charged_micros: 4 }, 0), { metered_ms: 0, charged_micros: 0 });
  });
});

describe('an empty balance stops a paused machine too (balance-empty)', () => {
  let ctx: TestContext;
  before(async () => {
    // 36 USD an hour paused: a cent a second, so a 5 USD top-up lasts 500 s of pause.
    ctx = await createBillingTestApp({ env: { MACHINE_PRICES: 'small=360/36,medium=0.10,large=0.20', METERING_INTERVAL: '10s' } });
  });
  after(() => ctx.close());

  test('paused until the balance is gone: machine.stopped, reason balance-empty', async () => {
    const owner = await newOwner(ctx);
    await saveCard(owner);
    assert.equal((await topUp(ctx, owner, '5.00')).statusCode, 201);
    const machine = await createMachine(owner, { name: 'spendthrift', size: 'small' });
    await finishBoot(ctx);
    assert.equal((await owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    for (let step = 0; step < 60 && (await owner.call('GET', `/api/machines/${machine.id}`)).json().status === 'paused'; step++) {
      ctx.clock.advance(10_000);
      await workerPass(ctx);
    }
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'stopped');
    const stops = await ctx.app.deps.db.selectFrom('events').select('payload').where('account_id', '=', owner.user.id).where('type', '=', 'machine.stopped').execute();
    assert.deepEqual(stops.map((row) => JSON.parse(row.payload).data.detail.reason), ['balance-empty']);
  });
});

describe('resuming on an empty balance', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createBillingTestApp({ env: { MACHINE_PRICES: 'small=0.05,medium=0.10,large=0.20' } });
  });
  after(() => ctx.close());

  test('is 402 payment_required and changes nothing; after a top-up it resumes', async () => {
    const owner = await fundedOwner(ctx);
    const machine = await createMachine(owner, { name: 'frozen-out', size: 'small' });
    await finishBoot(ctx);
    assert.equal((await owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    await ctx.app.deps.db.updateTable('billing_accounts').set({ balance_micros: 0 }).where('account_id', '=', owner.user.id).execute();
    const events = async () => (await ctx.app.deps.db.selectFrom('events').select('type').where('account_id', '=', owner.user.id).execute()).map((row) => row.type);
    const before = await events();

    assertProblem(await owner.call('POST', `/api/machines/${machine.id}/resume`), 402, 'payment_required');
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'paused');
    assert.deepEqual(await events(), before, 'no machine.resumed');

    assert.equal((await topUp(ctx, owner, '10.00')).statusCode, 201);
    assert.equal((await owner.call('POST', `/api/machines/${machine.id}/resume`)).statusCode, 200);
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');
  });
});
