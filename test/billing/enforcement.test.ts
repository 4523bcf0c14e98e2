import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import type { TestContext } from '../support/app.ts';
import { createMachine, finishBoot, newOwner, workerPass, type Envelope, type Owner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { billingOf, confirmEmail, createBillingTestApp, ledgerOf, saveCard, topUp } from './helpers.ts';

/** large: 36 USD/h, 0.01 USD a second, so 5 USD lasts a few minutes for a few machines. */
const ENV = { MACHINE_PRICES: 'small=0.05,medium=0.10,large=36', METERING_INTERVAL: '20s', LOW_BALANCE: '1.00' };

describe('enforcement: an empty balance stops machines (balance-empty) and is 402 payment_required', () => {
  let ctx: TestContext;
  let owner: Owner;
  let hook: Receiver;
  let secret: string;

  before(async () => {
    ctx = await createBillingTestApp({ env: ENV });
    owner = await newOwner(ctx);
    hook = await startReceiver();
    const endpoint = await owner.call('POST', '/api/event-webhooks', { url: hook.url, events: ['machine.stopped'] });
    assert.equal(endpoint.statusCode, 201, endpoint.body);
    secret = endpoint.json().secret;
  });
  after(async () => {
    await hook.close();
    await ctx.close();
  });

  const mailsTo = (subject: string) => ctx.smtp.to(owner.user.email).filter((mail) => mail.subject === subject);
  const statusOf = async (id: string) => (await owner.call('GET', `/api/machines/${id}`)).json().status;

  test('a new account cannot run machines until it has a balance', async () => {
    assertProblem(await owner.call('POST', '/api/machines', { name: 'too-early' }), 402, 'payment_required');
    assertProblem(await owner.call('POST', '/api/pools', { name: 'early-pool', size: 'large', count: 1 }).then(() => owner.call('POST', '/api/machines', { name: 'claimed', pool: 'early-pool' })), 402, 'payment_required');
    await owner.call('DELETE', `/api/pools/${(await owner.call('GET', '/api/pools')).json().data[0].id}`);
  });

  test('the 402 names the step still missing for the welcome credit, then a top-up once it is spent (it said "add a card and confirm your email" to an account that had confirmed it)', async () => {
    const other = await newOwner(ctx);
    const refusal = async () => {
      const response = await other.call('POST', '/api/machines', { name: 'first' });
      assertProblem(response, 402, 'payment_required');
      return response.json().detail as string;
    };
    assert.equal(await refusal(), 'The balance is empty. For the welcome credit of $10.00, confirm your email address (the link in the confirmation mail; POST /api/me/verify-email sends a new one) and add a card (the Billing page, or PUT /api/billing/payment-method; in test mode the card 4242 4242 4242 4242 is accepted and never charged), then try again.');
    await confirmEmail(ctx, other.user);
    assert.equal(await refusal(), 'The balance is empty. Your email address is confirmed: add a card (the Billing page, or PUT /api/billing/payment-method; in test mode the card 4242 4242 4242 4242 is accepted and never charged) and the welcome credit of $10.00 arrives at once. Then try again.');

    const third = await newOwner(ctx);
    await saveCard(third);
    const response = await third.call('POST', '/api/machines', { name: 'first' });
    assertProblem(response, 402, 'payment_required');
    assert.equal(response.json().detail, 'The balance is empty. A card is saved: confirm your email address (the link in the confirmation mail; POST /api/me/verify-email sends a new one) and the welcome credit of $10.00 arrives at once. Then try again.');

    // The credit, spent: only a top-up helps now.
    await saveCard(other);
    assert.equal((await billingOf(other)).balance, '10.000000');
    await ctx.app.deps.db.updateTable('billing_accounts').set({ balance_micros: 0 }).where('account_id', '=', other.user.id).execute();
    assert.equal(await refusal(), 'The balance is empty. Top up on the Billing page (POST /api/billing/top-ups), then try again.');
  });

  test('the balance runs out: one low-balance mail, then every starting or running machine (pooled too) stops with reason balance-empty, delivered to a real HTTPS receiver', async () => {
    await saveCard(owner);
    assert.equal((await topUp(ctx, owner, '5.00')).statusCode, 201);
    const a = await createMachine(owner, { name: 'a', size: 'large' });
    const b = await createMachine(owner, { name: 'b', size: 'large' });
    const idle = await createMachine(owner, { name: 'idle', size: 'small' });
    const pool = await owner.call('POST', '/api/pools', { name: 'warm', size: 'large', count: 1 });
    assert.equal(pool.statusCode, 201, pool.body);
    await finishBoot(ctx);
    await owner.call('POST', `/api/machines/${idle.id}/stop`);
    await workerPass(ctx);
    const pooled = (await owner.call('GET', '/api/machines?status=running')).json().data.find((m: { name: string }) => m.name.startsWith('warm-'));
    assert.ok(pooled, 'the pool has a running machine');

    // Three large machines: 0.03 USD a second, 0.60 a pass (every 20 s).
    const expected = ['4.400000', '3.800000', '3.200000', '2.600000', '2.000000', '1.400000', '0.800000', '0.200000'];
    for (const [i, after] of expected.entries()) {
      ctx.clock.advance(20_000);
      await workerPass(ctx);
      assert.equal((await billingOf(owner)).balance, after);
      assert.equal(mailsTo('Your balance is running low').length, i >= 6 ? 1 : 0, 'the low-balance mail once, when the balance falls below 1.00');
    }
    // One more machine, booting when the balance runs out.
    const late = await createMachine(owner, { name: 'late', size: 'large' });
    ctx.clock.advance(20_000);
    await workerPass(ctx);
    const balance = (await billingOf(owner)).balance;
    assert.ok(balance.startsWith('-'), `the balance went below zero (${balance})`);
    await workerPass(ctx);

    // Within one metering interval (CONTRACT 12): the boot of `late` may finish while its stop is under way.
    ctx.clock.advance(20_000);
    await workerPass(ctx);
    for (const machine of [a, b, late, pooled]) assert.equal(await statusOf(machine.id), 'stopped', machine.name);
    assert.equal(await statusOf(idle.id), 'stopped');
    const stops = await eventually(() => {
      const bodies = hook.requests.map((request) => {
        verifyWebhook(request.body, String(request.headers['service-signature']), secret, { now: Math.floor(ctx.clock.now() / 1000) });
        return JSON.parse(request.body) as Envelope;
      });
      const empty = bodies.filter((event) => (event.data.detail as { reason: string }).reason === 'balance-empty');
      return empty.length >= 4 ? empty : undefined;
    }, 10_000, 'four machine.stopped (balance-empty)');
    assert.deepEqual(stops.map((event) => (event.data.machine as { id: string }).id).sort(), [a.id, b.id, late.id, pooled.id].sort());
    assert.ok(stops.every((event) => event.type === 'machine.stopped'));

    // The low-balance mail once (crossing 1.00), the empty-balance mail once.
    assert.equal(mailsTo('Your balance is running low').length, 1);
    const [emptyMail, ...more] = mailsTo('Your balance is empty: machines stopped');
    assert.ok(emptyMail);
    assert.deepEqual(more, []);

    // Nothing more is charged, nobody refills the pool, and nothing more is mailed.
    const entries = (await ledgerOf(ctx, owner.user.id)).length;
    for (let i = 0; i < 3; i++) {
      ctx.clock.advance(20_000);
      await workerPass(ctx);
    }
    assert.equal((await ledgerOf(ctx, owner.user.id)).length, entries);
    assert.deepEqual((await owner.call('GET', '/api/machines?status=starting')).json().data, []);
    assert.deepEqual((await owner.call('GET', '/api/machines?status=running')).json().data, []);
    assert.equal(mailsTo('Your balance is empty: machines stopped').length, 1);

    // 402 for creating, starting and claiming.
    assertProblem(await owner.call('POST', '/api/machines', { name: 'no-money' }), 402, 'payment_required');
    assertProblem(await owner.call('POST', `/api/machines/${a.id}/start`), 402, 'payment_required');
    assertProblem(await owner.call('POST', '/api/machines', { name: 'claim', pool: 'warm' }), 402, 'payment_required');
    // Stopping and destroying still work.
    assert.equal((await owner.call('DELETE', `/api/machines/${idle.id}`)).statusCode, 200);

    // A top-up lets machines run again; the balance's low-balance mail comes again on the next crossing only.
    const topped = await topUp(ctx, owner, '10.00');
    assert.equal(topped.statusCode, 201);
    assert.equal((await owner.call('POST', `/api/machines/${a.id}/start`)).statusCode, 200);
    assert.equal((await owner.call('POST', '/api/machines', { name: 'again', size: 'small' })).statusCode, 201);
  });
});
