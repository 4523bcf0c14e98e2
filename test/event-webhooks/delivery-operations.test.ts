import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import { asBearer, asSession, createApiKey, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { eventually, receiverPool } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';

describe('test operation, retry, cancellation and receiver behaviour', () => {
  let ctx: TestContext;
  let user: TestUser;
  const receivers = receiverPool();
  const receiver = receivers.start;
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: asSession(user.session), ...(payload ? { payload } : {}) });

  before(async () => {
    ctx = await createTestApp({
      realClock: true,
      env: { WEBHOOK_TIMEOUT_MS: '500', WEBHOOK_RETRY_DELAYS: '50ms', WEBHOOK_MAX_ATTEMPTS: '2' },
    });
    user = await registerUser(ctx);
  });
  after(async () => {
    await receivers.closeAll();
    await ctx.close();
  });

  test('test sends webhook.test at once, reports {ok, status, error}, and appears in the deliveries listing', async () => {
    const hook = await receiver();
    const endpoint = await createEndpoint(ctx, user, { url: hook.url, events: ['run.failed'] });
    const response = await call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { ok: true, status: 200, error: null });
    assert.equal(hook.requests.length, 1, 'sent before the answer');
    const [request] = hook.requests;
    const event = verifyWebhook(request!.body, String(request!.headers['service-signature']), endpoint.secret);
    assert.equal(event.type, 'webhook.test');
    assert.deepEqual(event.data, { endpointId: endpoint.id });
    assert.equal(request!.headers['service-event'], 'webhook.test');
    const [delivery] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(delivery?.eventType, 'webhook.test');
    assert.equal(delivery?.status, 'delivered');
    assert.equal(delivery?.attempts, 1);
    assert.equal(delivery?.id, request!.headers['service-delivery']);
  });

  test('test reports the failure of a refusing receiver, once, without retrying, even when paused', async () => {
    const hook = await receiver(() => ({ status: 418, body: 'teapot' }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: false });
    const response = await call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    assert.deepEqual(response.json(), { ok: false, status: 418, error: 'receiver answered 418' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(hook.requests.length, 1);
    const [delivery] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(delivery?.status, 'failed');
    assert.equal(delivery?.lastResponse?.body, 'teapot');
  });

  test('test against a closed port reports status null and the connection error', async () => {
    const closed = await receiver();
    const url = closed.url;
    await closed.close();
    const endpoint = await createEndpoint(ctx, user, { url });
    const response = await call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    assert.deepEqual(response.json(), { ok: false, status: null, error: 'connection refused' });
  });

  test('retry sends a failed delivery again as a new series with the same dlv_ and evt_', async () => {
    let healthy = false;
    const hook = await receiver(() => ({ status: healthy ? 200 : 500 }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    const event = await emit(ctx, user.id, 'machine.destroyed');
    const failed = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'failed'));
    assert.equal(failed.attempts, 2);
    healthy = true;
    const retried = await call('POST', `/api/event-webhooks/deliveries/${failed.id}/retry`);
    assert.equal(retried.statusCode, 202);
    assert.equal(retried.json().status, 'pending');
    const delivered = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal(delivered.id, failed.id);
    assert.equal(delivered.eventId, event.id);
    assert.equal(delivered.attempts, 3);
    assert.equal(hook.requests.length, 3);
    assert.equal(new Set(hook.requests.map((r) => r.headers['service-delivery'])).size, 1);

    const again = await call('POST', `/api/event-webhooks/deliveries/${failed.id}/retry`);
    assert.equal(again.statusCode, 202, 'a delivered one can be sent again too');
    await hook.waitFor(4);
  });

  test('retry of a pending delivery is 409, of an unknown or foreign one 404', async () => {
    const hook = await receiver(() => 'hang');
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await emit(ctx, user.id, 'machine.created');
    const [pending] = await deliveriesOf(ctx, user, endpoint.id);
    const response = await call('POST', `/api/event-webhooks/deliveries/${pending!.id}/retry`);
    assert.equal(response.statusCode, 409);
    assert.equal(response.json().code, 'delivery_pending');
    assert.equal((await call('POST', '/api/event-webhooks/deliveries/dlv_00000000000000000000000000/retry')).statusCode, 404);
    const stranger = await registerUser(ctx);
    const foreign = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/deliveries/${pending!.id}/retry`, headers: asSession(stranger.session) });
    assert.equal(foreign.statusCode, 404);
  });

  test('deleting an endpoint cancels its pending deliveries', async () => {
    const hook = await receiver(() => 'hang');
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await emit(ctx, user.id, 'machine.created');
    await hook.waitFor(1);
    // The first attempt is in flight and would time out into a retry; the endpoint goes first.
    assert.equal((await call('DELETE', `/api/event-webhooks/${endpoint.id}`)).statusCode, 204);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    assert.equal(hook.requests.length, 1, 'no attempt after deletion');
    const rows = await ctx.app.deps.db.selectFrom('deliveries').select('id').where('endpoint_id', '=', endpoint.id).execute();
    assert.equal(rows.length, 0);
    assert.equal((await call('GET', `/api/event-webhooks/deliveries?endpoint=${endpoint.id}`)).statusCode, 404);
  });

  test('deleting an endpoint deletes its deliveries with their attempt logs, its lane and its jobs', async () => {
    let calls = 0;
    const hook = await receiver(() => (++calls === 1 ? { status: 500, body: 'down' } : 'hang'));
    const owner = await registerUser(ctx);
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    await emit(ctx, owner.id, 'machine.created');
    // The first attempt failed and is on record (its retry is due, or in flight with its job leased).
    const { db } = ctx.app.deps;
    await eventually(async () => ((await db.selectFrom('delivery_attempts').select('n').where('endpoint_id', '=', endpoint.id).execute()).length > 0 ? true : undefined));
    const deleted = await ctx.app.inject({ method: 'DELETE', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(owner.session) });
    assert.equal(deleted.statusCode, 204);
    assert.deepEqual(await db.selectFrom('deliveries').select('id').where('endpoint_id', '=', endpoint.id).execute(), []);
    assert.deepEqual(await db.selectFrom('delivery_attempts').select('n').where('endpoint_id', '=', endpoint.id).execute(), []);
    assert.deepEqual(await db.selectFrom('jobs').select('id').where('lane', '=', endpoint.id).execute(), []);
    assert.deepEqual(await db.selectFrom('job_lanes').select('lane').where('lane', '=', endpoint.id).execute(), []);
  });

  test('a delivery deleted in any way takes its attempt log with it', async () => {
    const hook = await receiver();
    const owner = await registerUser(ctx);
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    await emit(ctx, owner.id, 'machine.created');
    const { db } = ctx.app.deps;
    const delivery = await eventually(async () => (await deliveriesOf(ctx, owner, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal((await db.selectFrom('delivery_attempts').select('n').where('delivery_id', '=', delivery.id).execute()).length, 1);
    const others = (await db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', '!=', delivery.id).execute()).length;
    await db.deleteFrom('deliveries').where('id', '=', delivery.id).execute();
    assert.deepEqual(await db.selectFrom('delivery_attempts').select('n').where('delivery_id', '=', delivery.id).execute(), []);
    assert.equal((await db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', '!=', delivery.id).execute()).length, others, 'no other log touched');
  });

  // Regression: an endpoint deleted between an emit's read of the endpoints and its insert failed the emitting transaction (a foreign key violation).
  test('an endpoint deleted while an event is being emitted waits for it, then takes its delivery along', async () => {
    const owner = await registerUser(ctx);
    const hook = await receiver(() => 'hang');
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url, events: ['machine.started'] });
    let deletion: Promise<number> | undefined;
    let deletedBeforeCommit = false;
    // The emit, then the delete (on PostgreSQL from another connection) while the emitting transaction is still open.
    await inTransaction(ctx.app.deps.database, async (tx) => {
      await emitEvent(ctx.app.deps, tx, { accountId: owner.id, type: 'machine.started', data: {} });
      deletion = ctx.app.inject({ method: 'DELETE', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(owner.session) }).then((r) => r.statusCode);
      deletedBeforeCommit = await Promise.race([deletion.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 300))]);
    });
    assert.equal(deletedBeforeCommit, false, 'the delete waited for the emitting transaction');
    assert.equal(await deletion, 204);
    const rows = await ctx.app.deps.db.selectFrom('deliveries').select('id').where('endpoint_id', '=', endpoint.id).execute();
    assert.equal(rows.length, 0, 'its delivery was cancelled with it');
    const jobs = await ctx.app.deps.db.selectFrom('jobs').select('id').where('lane', '=', endpoint.id).execute();
    assert.equal(jobs.length, 0, 'and its job');
  });

  test('only the first 1,024 bytes of the answer are kept', async () => {
    const hook = await receiver(() => ({ status: 200, body: 'x'.repeat(1000) + 'y'.repeat(100_000) }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    await emit(ctx, user.id, 'machine.created');
    const delivery = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal(delivery.lastResponse?.body, 'x'.repeat(1000) + 'y'.repeat(24));
  });

  test('a character split by the 1,024-byte limit is left out, not garbled', async () => {
    const owner = await registerUser(ctx);
    const as = (method: 'GET' | 'POST', url: string) => ctx.app.inject({ method, url, headers: asSession(owner.session) });
    const hook = await receiver(() => ({ status: 200, body: 'a'.repeat(1023) + 'é and more' }));
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    await as('POST', `/api/event-webhooks/${endpoint.id}/test`);
    const [delivery] = await deliveriesOf(ctx, owner, endpoint.id);
    assert.equal(delivery?.lastResponse?.body, 'a'.repeat(1023));
  });

  // Regression: PostgreSQL refused the NUL, the whole batch of outcomes went unrecorded, and every delivery in it was sent again.
  test('an answer with NUL bytes is recorded (as U+FFFD) along with the rest of its batch', async () => {
    const owner = await registerUser(ctx);
    const as = (method: 'GET' | 'POST', url: string) => ctx.app.inject({ method, url, headers: asSession(owner.session) });
    const nul = await receiver(() => ({ status: 500, body: 'bad\u0000answer' }));
    const healthy = await receiver();
    const nulEndpoint = await createEndpoint(ctx, owner, { url: nul.url, events: ['machine.error'] });
    const healthyEndpoint = await createEndpoint(ctx, owner, { url: healthy.url, events: ['machine.error'] });
    await emit(ctx, owner.id, 'machine.error');
    const failed = await eventually(async () => (await deliveriesOf(ctx, owner, nulEndpoint.id)).find((d) => d.status === 'failed'));
    assert.equal(failed.attempts, 2);
    assert.equal(failed.lastResponse?.body, 'bad\uFFFDanswer');
    const [delivered] = await deliveriesOf(ctx, owner, healthyEndpoint.id);
    assert.equal(delivered?.status, 'delivered');
    assert.equal(delivered?.attempts, 1);
    assert.equal(healthy.requests.length, 1, 'the healthy endpoint got its event once');
    assert.equal(nul.requests.length, 2, 'WEBHOOK_MAX_ATTEMPTS attempts, no more');
    assert.deepEqual((await as('POST', `/api/event-webhooks/${nulEndpoint.id}/test`)).json(), { ok: false, status: 500, error: 'receiver answered 500' });
  });

  test('a test in flight is on record as interrupted until its answer comes, and is never retried', async () => {
    const owner = await registerUser(ctx);
    const as = (method: 'GET' | 'POST', url: string) => ctx.app.inject({ method, url, headers: asSession(owner.session) });
    const hook = await receiver(() => 'hang');
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    const answer = as('POST', `/api/event-webhooks/${endpoint.id}/test`);
    await hook.waitFor(1);
    const [inFlight] = await deliveriesOf(ctx, owner, endpoint.id);
    assert.equal(inFlight?.status, 'failed');
    assert.equal(inFlight?.nextAttemptAt, null);
    assert.match(String(inFlight?.lastResponse?.error), /interrupted/);
    assert.deepEqual((await answer).json(), { ok: false, status: null, error: 'no response within 500 ms (the request was sent)' });
    const [recorded] = await deliveriesOf(ctx, owner, endpoint.id);
    assert.equal(recorded?.attempts, 1);
    assert.equal(recorded?.lastResponse?.error, 'no response within 500 ms (the request was sent)');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(hook.requests.length, 1, 'sent once');
  });

  test('redirects are failures and are not followed', async () => {
    const target = await receiver();
    const hook = await receiver(() => ({ status: 301, headers: { location: target.url } }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    const response = await call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    assert.deepEqual(response.json(), { ok: false, status: 301, error: 'redirect (301) not followed' });
    assert.equal(target.requests.length, 0);
  });

  test('a receiver that answers 2xx headers in time succeeds even if its body never ends', async () => {
    const hook = await receiver(() => ({ status: 202, body: 'accepted, and more to come', endless: true }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    assert.deepEqual((await call('POST', `/api/event-webhooks/${endpoint.id}/test`)).json(), { ok: true, status: 202, error: null });
    const [delivery] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(delivery?.lastResponse?.body, 'accepted, and more to come');
  });

  test('endpoints and deliveries are managed with an API key as well', async () => {
    const key = await createApiKey(ctx, user);
    const hook = await receiver();
    const created = await ctx.app.inject({ method: 'POST', url: '/api/event-webhooks', headers: asBearer(key), payload: { url: hook.url } });
    assert.equal(created.statusCode, 201);
    const tested = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${created.json().id}/test`, headers: asBearer(key) });
    assert.equal(tested.json().ok, true);
    const listed = await ctx.app.inject({ method: 'GET', url: `/api/event-webhooks/deliveries?endpoint=${created.json().id}&limit=1`, headers: asBearer(key) });
    assert.equal(listed.json().data.length, 1);
  });
});

/** With a 5 s timeout, "not delayed" does not depend on how busy the machine is. */
describe('isolation between endpoints', () => {
  let isolated: TestContext;
  const isolatedReceivers = receiverPool();
  before(async () => {
    isolated = await createTestApp({ realClock: true, env: { WEBHOOK_TIMEOUT_MS: '5000', WEBHOOK_RETRY_DELAYS: '50ms', WEBHOOK_MAX_ATTEMPTS: '2' } });
  });
  after(async () => {
    await isolatedReceivers.closeAll();
    await isolated.close();
  });

  test('a slow or dead receiver never delays deliveries to other endpoints', async () => {
    const other = await registerUser(isolated);
    const slow = await isolatedReceivers.start(() => 'hang');
    const fast = await isolatedReceivers.start();
    const fastEndpoint = await createEndpoint(isolated, other, { url: fast.url, events: ['run.succeeded'] });
    const slowEndpoint = await createEndpoint(isolated, other, { url: slow.url, events: ['machine.created'] });
    for (let i = 0; i < 40; i++) await emit(isolated, other.id, 'machine.created');
    await slow.waitFor(16);
    await emit(isolated, other.id, 'run.succeeded', { run: {}, machine: {} });
    await fast.waitFor(1);
    const slowDeliveries = await deliveriesOf(isolated, other, slowEndpoint.id);
    assert.equal(slowDeliveries.length, 40);
    assert.ok(slowDeliveries.every((d) => d.attempts === 0), 'the fast endpoint was served while every slow attempt was still waiting for its first answer');
    assert.equal(slow.requests.length, 16, 'the slow receiver has exactly its lane of attempts in flight');
    await eventually(async () => (await deliveriesOf(isolated, other, fastEndpoint.id))[0]?.status === 'delivered' || undefined);
  });

  test('an emit leases to this worker what its lane can start at once, and leaves the rest to any worker', async () => {
    const small = await createTestApp({
      realClock: true,
      env: { WEBHOOK_TIMEOUT_MS: '5000' },
      buildOptions: { deliveryOptions: { perEndpointConcurrency: 2, laneBacklog: 1 }, runnerOptions: { pollIntervalMs: 60_000 } },
    });
    try {
      const owner = await registerUser(small);
      const slow = await isolatedReceivers.start(() => 'hang');
      const endpoint = await createEndpoint(small, owner, { url: slow.url, events: ['machine.created'] });
      for (let i = 0; i < 5; i++) await emit(small, owner.id, 'machine.created');
      await slow.waitFor(2);
      const jobs = await small.app.deps.db.selectFrom('jobs').select(['id', 'locked_by']).where('lane', '=', endpoint.id).orderBy('created_at').orderBy('id').execute();
      const runner = jobs[0]?.locked_by;
      assert.ok(runner, 'the first is leased to this process');
      assert.deepEqual(
        jobs.map((job) => job.locked_by),
        [runner, runner, runner, null, null],
        'two in flight and one queued are leased; the two beyond the lane wait in the database, unleased',
      );
      assert.equal(slow.requests.length, 2);
    } finally {
      await small.close();
    }
  });

  // Regression: the sender capped connections per origin at one lane's width, so a hanging path held every connection to its host.
  test('a hanging endpoint does not delay another endpoint on the same host', async () => {
    const user = await registerUser(isolated);
    const host = await isolatedReceivers.start((request) => (request.path === '/slow' ? 'hang' : { status: 200 }));
    const origin = new URL(host.url).origin;
    await createEndpoint(isolated, user, { url: `${origin}/slow`, events: ['machine.created'] });
    await createEndpoint(isolated, user, { url: `${origin}/fast`, events: ['run.succeeded'] });
    for (let i = 0; i < 20; i++) await emit(isolated, user.id, 'machine.created');
    await host.waitFor(16);
    await emit(isolated, user.id, 'run.succeeded', { run: {}, machine: {} });
    await eventually(() => (host.requests.some((request) => request.path === '/fast') ? true : undefined), 3000, 'the other endpoint served while the slow one hangs');
    assert.equal(host.unanswered(), 16, 'the hanging endpoint still has its whole lane in flight');
  });
});
