import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { eventually, receiverPool } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';
import { onPostgres } from '../support/database.ts';

describe('event delivery to real HTTPS receivers', () => {
  let ctx: TestContext;
  let user: TestUser;
  const receivers = receiverPool();
  const receiver = receivers.start;

  before(async () => {
    ctx = await createTestApp({
      realClock: true,
      env: { WEBHOOK_TIMEOUT_MS: '400', WEBHOOK_RETRY_DELAYS: '100ms,200ms,300ms', WEBHOOK_MAX_ATTEMPTS: '4' },
    });
    user = await registerUser(ctx);
  });
  after(async () => {
    await receivers.closeAll();
    await ctx.close();
  });

  test('a delivery carries exactly the spec headers and envelope, signed with the endpoint secret', async () => {
    const hook = await receiver();
    const endpoint = await createEndpoint(ctx, user, { url: hook.url, events: ['machine.stopped'] });
    assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const data = { machine: { id: 'mch_1', name: 'box', status: 'stopped', size: 'small', externalId: 'ext-1', labels: { team: 'a' } }, detail: { reason: 'requested' } };
    const event = await emit(ctx, user.id, 'machine.stopped', data);
    const [request] = await hook.waitFor(1);
    assert.ok(request);
    assert.equal(request.method, 'POST');
    assert.equal(request.headers['content-type'], 'application/json');
    assert.equal(request.headers['service-event'], 'machine.stopped');
    assert.match(String(request.headers['service-delivery']), /^dlv_[0-9a-z]{26}$/);
    const signature = String(request.headers['service-signature']);
    assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/);

    const body = JSON.parse(request.body);
    assert.deepEqual(Object.keys(body), ['id', 'type', 'createdAt', 'data']);
    assert.equal(body.id, event.id);
    assert.match(body.id, /^evt_[0-9a-z]{26}$/);
    assert.equal(body.type, 'machine.stopped');
    assert.match(body.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(body.data, data);

    // The package's verifier and an independent HMAC agree.
    assert.deepEqual(verifyWebhook(request.body, signature, endpoint.secret), body);
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]+)$/.exec(signature)!;
    assert.equal(createHmac('sha256', Buffer.from(endpoint.secret, 'utf8')).update(`${t}.${request.body}`).digest('hex'), v1);
    assert.ok(Math.abs(Number(t) - Date.now() / 1000) < 5);

    const [delivery] = await eventually(async () => {
      const list = await deliveriesOf(ctx, user, endpoint.id);
      return list[0]?.status === 'delivered' ? list : undefined;
    });
    assert.ok(delivery);
    assert.equal(delivery.id, request.headers['service-delivery']);
    assert.equal(delivery.eventId, event.id);
    assert.equal(delivery.attempts, 1);
    assert.equal(delivery.lastResponse?.status, 200);
    assert.equal(delivery.lastResponse?.body, 'ok');
    assert.equal(delivery.lastResponse?.error, null);
    assert.equal(delivery.nextAttemptAt, null);
  });

  test('a receiver that fails twice then succeeds gets the same evt_ and dlv_ three times, attempts = 3', async () => {
    const hook = await receiver((_request, n) => ({ status: n <= 2 ? 503 : 204 }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    const event = await emit(ctx, user.id, 'machine.created');
    const requests = await hook.waitFor(3);
    assert.equal(new Set(requests.map((r) => JSON.parse(r.body).id)).size, 1);
    assert.equal(JSON.parse(requests[0]!.body).id, event.id);
    assert.equal(new Set(requests.map((r) => r.headers['service-delivery'])).size, 1);
    assert.equal(new Set(requests.map((r) => r.body)).size, 1, 'the same bytes every time');
    for (const request of requests) verifyWebhook(request.body, String(request.headers['service-signature']), endpoint.secret);
    const delivery = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal(delivery.attempts, 3);
    assert.equal(delivery.lastResponse?.status, 204);
    // The retry schedule: 100 ms after the first failure, 200 ms after the second.
    assert.ok(requests[1]!.at - requests[0]!.at >= 100 - 5);
    assert.ok(requests[2]!.at - requests[1]!.at >= 200 - 5);
  });

  test('a receiver that never answers is tried exactly WEBHOOK_MAX_ATTEMPTS times, on schedule, then failed', async () => {
    const hook = await receiver(() => 'hang');
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await emit(ctx, user.id, 'machine.error');
    const delivery = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'failed'), 15_000);
    assert.equal(delivery.attempts, 4);
    assert.equal(hook.requests.length, 4);
    assert.equal(delivery.lastResponse?.status, null);
    assert.match(String(delivery.lastResponse?.error), /no response within 400 ms/);
    assert.equal(delivery.nextAttemptAt, null);
    const gaps = hook.requests.slice(1).map((r, i) => r.at - hook.requests[i]!.at);
    // Each retry waits its configured delay (100, 200, 300 ms) after the timeout ended the attempt before it, which came
    // after that attempt arrived: never less than the delay, however slow the machine. (The exact schedule, on a
    // controlled clock, is retry-schedule.test.ts's.)
    [100, 200, 300].forEach((minimum, i) => assert.ok(gaps[i]! >= minimum, `gap ${i} was ${gaps[i]} ms`));
    await new Promise((resolve) => setTimeout(resolve, 800));
    assert.equal(hook.requests.length, 4, 'no attempt after the last');
  });

  test('endpoints receive only the types they subscribe to, or everything with "*"', async () => {
    const stopped = await receiver();
    const all = await receiver();
    await createEndpoint(ctx, user, { url: stopped.url, events: ['machine.stopped', 'run.failed'] });
    await createEndpoint(ctx, user, { url: all.url, events: ['*'] });
    await emit(ctx, user.id, 'machine.created');
    await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await emit(ctx, user.id, 'machine.stopped');
    await all.waitFor(3);
    await stopped.waitFor(2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(stopped.requests.map((r) => r.headers['service-event']).sort(), ['machine.stopped', 'run.failed']);
    assert.deepEqual(all.requests.map((r) => r.headers['service-event']).sort(), ['machine.created', 'machine.stopped', 'run.failed']);
  });

  test('another account\'s events never reach my endpoints', async () => {
    const mine = await receiver();
    await createEndpoint(ctx, user, { url: mine.url });
    const other = await registerUser(ctx);
    await emit(ctx, other.id, 'machine.created');
    await emit(ctx, user.id, 'machine.destroyed');
    await mine.waitFor(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(mine.requests.map((r) => r.headers['service-event']), ['machine.destroyed']);
  });

  test('a paused endpoint receives nothing new, holds what was pending, and gets it when resumed', async () => {
    let accept = false;
    const hook = await receiver(() => (accept ? { status: 200 } : { status: 500 }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await emit(ctx, user.id, 'machine.started');
    await hook.waitFor(1);
    const pause = await ctx.app.inject({ method: 'PATCH', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session), payload: { enabled: false } });
    assert.equal(pause.statusCode, 200);
    assert.equal(pause.json().enabled, false);
    await emit(ctx, user.id, 'machine.stopped');
    accept = true;
    // Its retry fell due 100 ms after the first failure, well within this wait.
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(hook.requests.length, 1, 'nothing was sent while paused, not even the due retry');
    const pending = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(pending.length, 1, 'no delivery was created for the event emitted while paused');
    assert.equal(pending[0]!.status, 'pending');
    assert.equal(pending[0]!.attempts, 1);
    await ctx.app.inject({ method: 'PATCH', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session), payload: { enabled: true } });
    const delivered = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal(delivered.eventType, 'machine.started');
    assert.ok(hook.requests.every((r) => r.headers['service-event'] === 'machine.started'));
  });

  test('after rotation, deliveries are signed with the new secret and the old one fails', async () => {
    const hook = await receiver();
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    const rotated = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/rotate-secret`, headers: asSession(user.session) });
    assert.equal(rotated.statusCode, 200);
    const { secret } = rotated.json();
    assert.deepEqual(Object.keys(rotated.json()), ['secret']);
    assert.notEqual(secret, endpoint.secret);
    await emit(ctx, user.id, 'machine.claimed');
    const [request] = await hook.waitFor(1);
    const header = String(request!.headers['service-signature']);
    assert.ok(verifyWebhook(request!.body, header, secret));
    assert.throws(() => verifyWebhook(request!.body, header, endpoint.secret), /no signature matches/);
  });

  test('a retry after rotation is signed with the new secret', async () => {
    const hook = await receiver((_request, n) => ({ status: n === 1 ? 503 : 200 }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url, events: ['machine.destroyed'] });
    await emit(ctx, user.id, 'machine.destroyed');
    await hook.waitFor(1);
    const { secret } = (await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/rotate-secret`, headers: asSession(user.session) })).json();
    const [first, second] = await hook.waitFor(2);
    assert.ok(verifyWebhook(first!.body, String(first!.headers['service-signature']), endpoint.secret));
    assert.ok(verifyWebhook(second!.body, String(second!.headers['service-signature']), secret));
    assert.throws(() => verifyWebhook(second!.body, String(second!.headers['service-signature']), endpoint.secret), /no signature matches/);
  });

  // Regression: the hand-off after commit installed the endpoint as the emitting transaction had read it, secret and all.
  test('an event whose transaction read the endpoint before a rotation committed is signed with the new secret', { skip: !onPostgres && 'needs two connections at once' }, async () => {
    const hook = await receiver();
    const endpoint = await createEndpoint(ctx, user, { url: hook.url, events: ['machine.expired'] });
    let secret = '';
    await inTransaction(ctx.app.deps.database, async (tx) => {
      await emitEvent(ctx.app.deps, tx, { accountId: user.id, type: 'machine.expired', data: {} });
      const rotated = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/rotate-secret`, headers: asSession(user.session) });
      secret = rotated.json().secret;
    });
    const [request] = await hook.waitFor(1);
    assert.ok(verifyWebhook(request!.body, String(request!.headers['service-signature']), secret));
  });
});
