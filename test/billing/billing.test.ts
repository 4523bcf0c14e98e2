import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { settled, type TestContext } from '../support/app.ts';
import { newOwner, type Owner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { billingOf, card, confirmEmail, createBillingTestApp, DECLINING_CARD, ledgerOf, MASTERCARD, REFUSED_CARD, saveCard, topUp, VISA } from './helpers.ts';

describe('billing: cards, the welcome credit, top-ups (CONTRACT 12)', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createBillingTestApp();
  });
  after(() => ctx.close());

  const mailsTo = (owner: Owner, subject: string) => ctx.smtp.to(owner.user.email).filter((mail) => mail.subject === subject);

  test('GET /api/billing of a new account: no balance, the prices, what the welcome credit waits for', async () => {
    const owner = await newOwner(ctx);
    assert.deepEqual(await billingOf(owner), {
      balance: '0.000000',
      currency: 'usd',
      prices: { small: '0.050000', medium: '0.100000', large: '0.200000' },
      pausedPrices: { small: '0.005000', medium: '0.010000', large: '0.020000' },
      paymentMethod: null,
      welcomeCredit: { amount: '10.000000', grantedAt: null, missing: ['email_confirmation', 'payment_method'] },
    });
  });

  test('a card is checked (Luhn, expiry, cvc), saved as brand, last4 and expiry, replaced by PUT and removed by DELETE', async () => {
    const owner = await newOwner(ctx);
    const saved = await owner.call('PUT', '/api/billing/payment-method', card(VISA));
    assert.equal(saved.statusCode, 200);
    assert.deepEqual(saved.json(), { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2030, createdAt: new Date(ctx.clock.now()).toISOString() });
    assert.deepEqual((await billingOf(owner)).paymentMethod, saved.json());

    for (const [body, why] of [
      [card('4242424242424241'), 'Luhn'],
      [card(VISA, { expYear: 2026, expMonth: 10 }), 'expired (the clock is November 2026)'],
      [card(VISA, { cvc: '12' }), 'cvc too short'],
      [card(VISA, { cvc: '12345' }), 'cvc too long'],
      [card(VISA, { cvc: 123 }), 'cvc not a string'],
      [card('4242 4242 4242 4242'), 'not digits'],
      [card(VISA, { expMonth: 13 }), 'month 13'],
      [card(VISA, { expYear: 30 }), 'two-digit year'],
      [card(VISA, { extra: true }), 'unknown field'],
      [{ number: VISA, expMonth: 12, expYear: 2030 }, 'no cvc'],
    ] as const) {
      assertProblem(await owner.call('PUT', '/api/billing/payment-method', body), 400, 'invalid_request');
      assert.equal((await billingOf(owner)).paymentMethod?.last4, '4242', why);
    }

    const replaced = await owner.call('PUT', '/api/billing/payment-method', card(MASTERCARD, { expMonth: 11, expYear: 2026 }));
    assert.equal(replaced.statusCode, 200, 'this month is not expired yet');
    assert.equal(replaced.json().brand, 'mastercard');
    assert.equal(replaced.json().last4, '4444');

    assert.equal((await owner.call('DELETE', '/api/billing/payment-method')).statusCode, 204);
    assert.equal((await billingOf(owner)).paymentMethod, null);
    assert.equal((await owner.call('DELETE', '/api/billing/payment-method')).statusCode, 204, 'no card: still 204');
  });

  test('a refused card is 402 card_declined and changes nothing', async () => {
    const owner = await newOwner(ctx);
    await confirmEmail(ctx, owner.user);
    const before = await billingOf(owner);
    assertProblem(await owner.call('PUT', '/api/billing/payment-method', card(REFUSED_CARD)), 402, 'card_declined');
    assert.deepEqual(await billingOf(owner), before);
    assert.deepEqual(await ledgerOf(ctx, owner.user.id), []);
  });

  test('the welcome credit: once when the card comes first, with a mail', async () => {
    const owner = await newOwner(ctx);
    await saveCard(owner);
    assert.deepEqual((await billingOf(owner)).welcomeCredit, { amount: '10.000000', grantedAt: null, missing: ['email_confirmation'] });
    await confirmEmail(ctx, owner.user);
    const billing = await billingOf(owner);
    assert.equal(billing.balance, '10.000000');
    assert.equal(billing.welcomeCredit.grantedAt, new Date(ctx.clock.now()).toISOString());
    assert.deepEqual(billing.welcomeCredit.missing, []);
    await saveCard(owner, MASTERCARD);
    await owner.call('DELETE', '/api/billing/payment-method');
    await saveCard(owner);
    const ledger = await ledgerOf(ctx, owner.user.id);
    assert.deepEqual(ledger.map((e) => [e.kind, e.amount_micros, e.balance_after_micros]), [['welcome_credit', 10_000_000, 10_000_000]]);
    await settled(ctx);
    const [mail, ...more] = mailsTo(owner, 'Your welcome credit has arrived');
    assert.ok(mail);
    assert.deepEqual(more, []);
    assert.match(mail.text, /10\.000000 USD/);
  });

  test('the welcome credit: once when the confirmation comes first', async () => {
    const owner = await newOwner(ctx);
    await confirmEmail(ctx, owner.user);
    assert.equal((await billingOf(owner)).balance, '0.000000');
    assert.deepEqual((await billingOf(owner)).welcomeCredit.missing, ['payment_method']);
    await saveCard(owner);
    await saveCard(owner, MASTERCARD);
    assert.equal((await billingOf(owner)).balance, '10.000000');
    assert.equal((await ledgerOf(ctx, owner.user.id)).length, 1);
  });

  test('the welcome credit: once when 20 attempts race (cards saved while the email is confirmed)', async () => {
    const owner = await newOwner(ctx);
    await settled(ctx);
    const mail = ctx.smtp.to(owner.user.email).at(-1)!;
    const token = /token=([A-Za-z0-9_-]+)/.exec(mail.text)![1]!;
    const attempts = [
      ...Array.from({ length: 19 }, (_, i) => owner.call('PUT', '/api/billing/payment-method', card(i % 2 ? VISA : MASTERCARD))),
      ctx.app.inject({ method: 'POST', url: '/api/auth/verify', headers: { origin: ctx.config.publicUrl }, payload: { token } }),
    ];
    const answers = await Promise.all(attempts);
    assert.deepEqual(answers.map((a) => a.statusCode), Array(20).fill(200));
    const ledger = await ledgerOf(ctx, owner.user.id);
    assert.deepEqual(ledger.map((e) => e.kind), ['welcome_credit']);
    assert.equal((await billingOf(owner)).balance, '10.000000');
  });

  test('top-ups: charged to the card, 201 with the new balance; amounts out of range are 400; no card is 409', async () => {
    const owner = await newOwner(ctx);
    assertProblem(await topUp(ctx, owner, '5.00'), 409, 'payment_method_required');
    await saveCard(owner);
    const first = await topUp(ctx, owner, '5.00');
    assert.equal(first.statusCode, 201, first.body);
    const body = first.json();
    assert.match(body.id, /^txn_[0-9a-z]{26}$/);
    assert.deepEqual(body, { id: body.id, kind: 'top_up', amount: '5.000000', balanceAfter: '5.000000', createdAt: new Date(ctx.clock.now()).toISOString() });
    assert.equal((await topUp(ctx, owner, '1000.00')).json().balanceAfter, '1005.000000');
    assert.equal((await topUp(ctx, owner, '12.345678')).json().balanceAfter, '1017.345678');
    for (const amount of ['4.99', '1000.01', '0', '-5.00', '5.0000001', 'five', '1e3', '']) {
      assertProblem(await topUp(ctx, owner, amount), 400, 'invalid_request');
    }
    assertProblem(await owner.call('POST', '/api/billing/top-ups', { amount: 5 }), 400, 'invalid_request');
    assertProblem(await owner.call('POST', '/api/billing/top-ups', { amount: '5.00', currency: 'usd' }), 400, 'invalid_request');
    assert.equal((await billingOf(owner)).balance, '1017.345678');
  });

  test('a card whose charges are declined: saved, but a top-up is 402 card_declined and changes nothing', async () => {
    const owner = await newOwner(ctx);
    await saveCard(owner, DECLINING_CARD);
    assert.equal((await billingOf(owner)).paymentMethod?.last4, '9995');
    assertProblem(await topUp(ctx, owner, '20.00'), 402, 'card_declined');
    assertProblem(await topUp(ctx, owner, '20.00', 'declined-once'), 402, 'card_declined');
    assert.equal((await billingOf(owner)).balance, '0.000000');
    assert.deepEqual(await ledgerOf(ctx, owner.user.id), []);
    // The key of a declined top-up is free again: with a good card the same key charges.
    await saveCard(owner);
    assert.equal((await topUp(ctx, owner, '20.00', 'declined-once')).statusCode, 201);
    assert.equal((await billingOf(owner)).balance, '20.000000');
  });

  test('a retried top-up with the same Idempotency-Key charges once, even when the retries race', async () => {
    const owner = await newOwner(ctx);
    await saveCard(owner);
    const first = await topUp(ctx, owner, '25.00', 'order-1');
    assert.equal(first.statusCode, 201);
    const again = await topUp(ctx, owner, '25.00', 'order-1');
    assert.equal(again.statusCode, 201);
    assert.deepEqual(again.json(), first.json());
    const racing = await Promise.all(Array.from({ length: 10 }, () => topUp(ctx, owner, '7.00', 'order-2')));
    assert.deepEqual(racing.map((r) => r.statusCode), Array(10).fill(201));
    assert.equal(new Set(racing.map((r) => r.json().id)).size, 1, 'one transaction for all ten');
    assert.equal((await billingOf(owner)).balance, '32.000000');
    assert.equal((await ledgerOf(ctx, owner.user.id)).length, 2);
    assertProblem(await topUp(ctx, owner, '30.00', 'order-1'), 400, 'invalid_request');
    assertProblem(await topUp(ctx, owner, '30.00', 'k'.repeat(256)), 400, 'invalid_request');
    assert.equal((await topUp(ctx, owner, '30.00', 'k'.repeat(255))).statusCode, 201);
    // Another account's key of the same name is its own.
    const other = await newOwner(ctx);
    await saveCard(other);
    assert.equal((await topUp(ctx, other, '25.00', 'order-1')).json().balanceAfter, '25.000000');
    // Kept 24 hours: after that the key charges again.
    ctx.clock.advance(24 * 3_600_000 + 1);
    assert.equal((await topUp(ctx, owner, '25.00', 'order-1')).json().balanceAfter, '87.000000');
  });

  test('transactions: newest first, paginated, with every field', async () => {
    const owner = await newOwner(ctx);
    await saveCard(owner);
    await confirmEmail(ctx, owner.user);
    for (const amount of ['5.00', '6.00', '7.00']) await topUp(ctx, owner, amount);
    const page = await owner.call('GET', '/api/billing/transactions?limit=2');
    assert.equal(page.statusCode, 200);
    const { data, nextCursor } = page.json();
    assert.deepEqual(data.map((t: { amount: string }) => t.amount), ['7.000000', '6.000000']);
    assert.deepEqual(Object.keys(data[0]).sort(), ['amount', 'balanceAfter', 'createdAt', 'id', 'kind', 'machineId', 'periodEnd', 'periodStart']);
    assert.equal(data[0].balanceAfter, '28.000000');
    assert.equal(data[0].machineId, null);
    const rest = (await owner.call('GET', `/api/billing/transactions?limit=2&cursor=${nextCursor}`)).json();
    assert.deepEqual(rest.data.map((t: { kind: string; amount: string }) => [t.kind, t.amount]), [['top_up', '5.000000'], ['welcome_credit', '10.000000']]);
    assert.equal(rest.nextCursor, null);
    assertProblem(await owner.call('GET', '/api/billing/transactions?limit=0'), 400, 'invalid_request');
    assertProblem(await owner.call('GET', '/api/billing/transactions?limit=101'), 400, 'invalid_request');
    const stranger = await newOwner(ctx);
    assert.deepEqual((await stranger.call('GET', '/api/billing/transactions')).json(), { data: [], nextCursor: null });
  });

  test('every billing route needs a credential', async () => {
    for (const [method, url] of [['GET', '/api/billing'], ['PUT', '/api/billing/payment-method'], ['DELETE', '/api/billing/payment-method'], ['POST', '/api/billing/top-ups'], ['GET', '/api/billing/transactions'], ['GET', '/api/billing/usage']] as const) {
      assertProblem(await ctx.app.inject({ method, url }), 401, 'unauthenticated');
    }
  });

  test('OpenAPI describes every billing route', async () => {
    const doc = (await ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    for (const [path, method] of [['/api/billing', 'get'], ['/api/billing/payment-method', 'put'], ['/api/billing/payment-method', 'delete'], ['/api/billing/top-ups', 'post'], ['/api/billing/transactions', 'get'], ['/api/billing/usage', 'get']]) {
      assert.ok(doc.paths[path!]?.[method!], `${method} ${path}`);
    }
  });
});
