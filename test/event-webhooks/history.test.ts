import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function caller(ctx: TestContext, user: TestUser) {
  return (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) =>
    ctx.app.inject({ method, url, headers: asSession(user.session), ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
}

const eventIdOf = (body: string) => (JSON.parse(body) as { id: string }).id;

/** CONTRACT 13: the event history, as delivered. */
describe('GET /api/events', () => {
  let ctx: TestContext;
  let user: TestUser;
  let other: TestUser;
  let receiver: Receiver;

  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
    other = await registerUser(ctx);
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  test('lists envelopes newest first, byte for byte as delivered, with a type filter and pages; webhook.test events are not listed', async () => {
    const call = caller(ctx, user);
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/events` });
    const emitted = [];
    for (let i = 0; i < 5; i++) {
      emitted.push(await emit(ctx, user.id, i % 2 === 0 ? 'machine.created' : 'run.failed', { machine: { id: `mch_${i}` }, detail: { i, text: 'é ✓ "quoted"' } }));
      ctx.clock.advance(1000);
    }
    await emit(ctx, other.id, 'machine.created');
    assert.equal((await call('POST', `/api/event-webhooks/${endpoint.id}/test`)).statusCode, 200);
    await ctx.app.jobs.drain();

    const all = await call('GET', '/api/events');
    assert.equal(all.statusCode, 200);
    assert.match(String(all.headers['content-type']), /^application\/json/);
    const body = all.json() as { data: Array<{ id: string; type: string }>; nextCursor: string | null };
    assert.deepEqual(body.data.map((e) => e.id), emitted.map((e) => e.id).reverse(), 'newest first, no test event, nothing of the other account');
    assert.equal(body.nextCursor, null);
    // Exactly the bytes the receiver got, in the listing and one by one.
    for (const request of receiver.requests.filter((r) => !r.body.includes('"webhook.test"'))) {
      assert.ok(all.body.includes(request.body), 'the listing carries the delivered envelope verbatim');
      const one = await call('GET', `/api/events/${eventIdOf(request.body)}`);
      assert.equal(one.statusCode, 200);
      assert.equal(one.body, request.body);
    }

    const created = (await call('GET', '/api/events?type=machine.created')).json() as { data: Array<{ type: string }> };
    assert.equal(created.data.length, 3);
    assert.ok(created.data.every((e) => e.type === 'machine.created'));

    const first = (await call('GET', '/api/events?limit=2')).json() as { data: Array<{ id: string }>; nextCursor: string };
    assert.deepEqual(first.data.map((e) => e.id), [emitted[4]!.id, emitted[3]!.id]);
    assert.equal(first.nextCursor, emitted[3]!.id);
    const second = (await call('GET', `/api/events?limit=2&cursor=${first.nextCursor}`)).json() as { data: Array<{ id: string }> };
    assert.deepEqual(second.data.map((e) => e.id), [emitted[2]!.id, emitted[1]!.id]);
  });

  test('errors: unknown, foreign and test events are 404; a bad filter or limit is 400; no credential is 401', async () => {
    const call = caller(ctx, user);
    const foreign = await emit(ctx, other.id, 'machine.created');
    assert.equal((await call('GET', `/api/events/${foreign.id}`)).statusCode, 404);
    assert.equal((await call('GET', '/api/events/evt_01jdnotthere000000000000000')).statusCode, 404);
    const testEvent = (await ctx.app.deps.db.selectFrom('events').select('id').where('type', '=', 'webhook.test').where('account_id', '=', user.id).executeTakeFirst())!;
    assert.equal((await call('GET', `/api/events/${testEvent.id}`)).statusCode, 404);
    for (const query of ['type=webhook.test', 'type=nope', 'limit=0', 'limit=101', 'cursor=bad', 'other=1']) {
      const response = await call('GET', `/api/events?${query}`);
      assert.equal(response.statusCode, 400, query);
      assert.equal(response.json().code, 'invalid_request');
    }
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/events' })).statusCode, 401);
  });
});

describe('the attempt log and the deliveries filters', () => {
  let ctx: TestContext;
  let user: TestUser;
  let receiver: Receiver;

  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
    // Twice a long error body, then success.
    receiver = await startReceiver((_request, n) => (n <= 2 ? { status: 503, body: 'x'.repeat(3000) } : { status: 200, body: 'thanks' }));
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  test('a delivery that failed twice then succeeded has three entries, each with time, status, duration, error and the first 1,024 bytes', async () => {
    const call = caller(ctx, user);
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/log`, events: ['machine.created'] });
    const start = ctx.clock.now();
    await emit(ctx, user.id, 'machine.created');
    await ctx.app.jobs.drain();
    ctx.clock.advance(30_000);
    await ctx.app.jobs.drain();
    ctx.clock.advance(60_000);
    await ctx.app.jobs.drain();
    const [listed] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(listed?.status, 'delivered');
    const response = await call('GET', `/api/event-webhooks/deliveries/${listed!.id}`);
    assert.equal(response.statusCode, 200);
    const delivery = response.json();
    assert.equal(delivery.id, listed!.id);
    assert.equal(delivery.attempts, 3);
    assert.deepEqual(delivery.lastResponse, listed!.lastResponse);
    assert.equal(delivery.attemptLog.length, 3);
    assert.deepEqual(delivery.attemptLog.map((a: { n: number }) => a.n), [1, 2, 3]);
    assert.deepEqual(delivery.attemptLog.map((a: { at: string }) => a.at), [start, start + 30_000, start + 90_000].map((t) => new Date(t).toISOString()));
    assert.deepEqual(delivery.attemptLog.map((a: { status: number }) => a.status), [503, 503, 200]);
    assert.equal(delivery.attemptLog[0].body, 'x'.repeat(1024));
    assert.equal(delivery.attemptLog[2].body, 'thanks');
    assert.equal(delivery.attemptLog[2].error, null);
    assert.ok(delivery.attemptLog.every((a: { durationMs: number }) => Number.isInteger(a.durationMs) && a.durationMs >= 0));
    assert.ok(delivery.attemptLog[0].error === null || typeof delivery.attemptLog[0].error === 'string');
  });

  test('a test delivery has its one attempt logged; the listing filters by status and event type', async () => {
    const call = caller(ctx, user);
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/filters` });
    await call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    await emit(ctx, user.id, 'run.succeeded', { run: {}, machine: {} });
    await ctx.app.jobs.drain();
    const all = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(all.length, 2);
    const testDelivery = all.find((d) => d.eventType === 'webhook.test')!;
    const logged = (await call('GET', `/api/event-webhooks/deliveries/${testDelivery.id}`)).json();
    assert.equal(logged.attemptLog.length, 1);
    assert.equal(logged.attemptLog[0].n, 1);

    const byType = (await call('GET', `/api/event-webhooks/deliveries?endpoint=${endpoint.id}&eventType=run.succeeded`)).json().data;
    assert.deepEqual(byType.map((d: { eventType: string }) => d.eventType), ['run.succeeded']);
    const delivered = (await call('GET', '/api/event-webhooks/deliveries?status=delivered')).json().data;
    assert.ok(delivered.length >= 3 && delivered.every((d: { status: string }) => d.status === 'delivered'));
    assert.deepEqual((await call('GET', '/api/event-webhooks/deliveries?status=pending')).json().data, []);
    assert.equal((await call('GET', '/api/event-webhooks/deliveries?status=lost')).statusCode, 400);
    assert.equal((await call('GET', '/api/event-webhooks/deliveries/dlv_01jdnotthere000000000000000')).statusCode, 404);
    const stranger = await registerUser(ctx);
    assert.equal((await caller(ctx, stranger)('GET', `/api/event-webhooks/deliveries/${testDelivery.id}`)).statusCode, 404);
  });
});

describe('recover and replay', () => {
  let ctx: TestContext;
  let user: TestUser;
  let receiver: Receiver;
  let up = false;

  before(async () => {
    // Two attempts a series, so a delivery fails within a minute.
    ctx = await createTestApp({ env: { WEBHOOK_MAX_ATTEMPTS: '2', WEBHOOK_RETRY_DELAYS: '1m' } });
    user = await registerUser(ctx);
    receiver = await startReceiver(() => (up ? { status: 200, body: 'ok' } : { status: 503 }));
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  const failTheSeries = async () => {
    await ctx.app.jobs.drain();
    ctx.clock.advance(MINUTE);
    await ctx.app.jobs.drain();
  };

  test('a receiver down for three days gets every event after recover, once', async () => {
    const call = caller(ctx, user);
    up = false;
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/down`, events: ['machine.created'] });
    const since = new Date(ctx.clock.now()).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await emit(ctx, user.id, 'machine.created')).id);
      await failTheSeries();
      ctx.clock.advance(12 * HOUR - MINUTE);
    }
    let deliveries = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(deliveries.length, 7);
    assert.ok(deliveries.every((d) => d.status === 'failed' && d.attempts === 2));

    up = true;
    const before = receiver.requests.length;
    const recovered = await call('POST', `/api/event-webhooks/${endpoint.id}/recover`, { since });
    assert.equal(recovered.statusCode, 202);
    assert.deepEqual(recovered.json(), { count: 7 });
    await ctx.app.jobs.drain();
    deliveries = await deliveriesOf(ctx, user, endpoint.id);
    assert.ok(deliveries.every((d) => d.status === 'delivered' && d.attempts === 3), JSON.stringify(deliveries.map((d) => [d.status, d.attempts])));
    const received = receiver.requests.slice(before).map((r) => eventIdOf(r.body));
    assert.deepEqual(received.sort(), [...ids].sort(), 'each event once');
    const log = (await call('GET', `/api/event-webhooks/deliveries/${deliveries[0]!.id}`)).json().attemptLog;
    assert.deepEqual(log.map((a: { status: number }) => a.status), [503, 503, 200]);

    // Nothing failed is left: a second recover finds nothing.
    assert.deepEqual((await call('POST', `/api/event-webhooks/${endpoint.id}/recover`, { since })).json(), { count: 0 });
  });

  test('recover takes only the window, only failed deliveries, only this endpoint', async () => {
    const call = caller(ctx, user);
    up = false;
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/window`, events: ['run.failed'] });
    await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await failTheSeries();
    ctx.clock.advance(HOUR);
    const since = new Date(ctx.clock.now()).toISOString();
    await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await failTheSeries();
    const until = new Date(ctx.clock.now()).toISOString();
    ctx.clock.advance(HOUR);
    await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await failTheSeries();
    up = true;
    const response = await call('POST', `/api/event-webhooks/${endpoint.id}/recover`, { since, until });
    assert.deepEqual(response.json(), { count: 1 });
    // The lane is probing after six failures in a row: one attempt a second.
    ctx.clock.advance(1000);
    await ctx.app.jobs.drain();
    const statuses = (await deliveriesOf(ctx, user, endpoint.id)).map((d) => d.status);
    assert.deepEqual(statuses, ['failed', 'delivered', 'failed'], 'newest first: only the middle one, in the window');
  });

  test('replay fills in exactly the events missed while paused, once each, even when run twice at once', async () => {
    const call = caller(ctx, user);
    up = true;
    // Events before the endpoint existed count as missed too.
    const early = await emit(ctx, user.id, 'machine.stopped');
    ctx.clock.advance(1000);
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/replay`, events: ['machine.stopped', 'machine.error'] });
    const delivered = await emit(ctx, user.id, 'machine.stopped');
    await ctx.app.jobs.drain();
    assert.equal((await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: false })).statusCode, 200);
    const missed = [early.id];
    for (let i = 0; i < 6; i++) {
      missed.push((await emit(ctx, user.id, i % 2 ? 'machine.stopped' : 'machine.error')).id);
      await emit(ctx, user.id, 'machine.created'); // not subscribed: never replayed
    }
    await call('POST', `/api/event-webhooks/${endpoint.id}/test`); // a test event: never replayed
    assert.equal((await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: true })).statusCode, 200);
    await ctx.app.jobs.drain();
    const before = receiver.requests.length;

    const since = new Date(ctx.clock.now() - DAY).toISOString();
    const [one, two] = await Promise.all([
      call('POST', `/api/event-webhooks/${endpoint.id}/replay`, { since }),
      call('POST', `/api/event-webhooks/${endpoint.id}/replay`, { since }),
    ]);
    assert.equal(one.statusCode, 202);
    assert.equal(two.statusCode, 202);
    assert.equal(one.json().count + two.json().count, missed.length, `${one.body} + ${two.body}`);
    await ctx.app.jobs.drain();
    const received = receiver.requests.slice(before).map((r) => eventIdOf(r.body));
    assert.deepEqual(received.sort(), [...missed].sort(), 'each missed event once, nothing else');
    assert.ok(!received.includes(delivered.id));
    assert.deepEqual((await call('POST', `/api/event-webhooks/${endpoint.id}/replay`, { since })).json(), { count: 0 });
    const deliveries = await deliveriesOf(ctx, user, endpoint.id);
    assert.ok(deliveries.every((d) => d.status === 'delivered'));
  });

  test('errors: a window reaching past the retention period or ending before it starts is 400; unknown endpoints 404; bodies are strict', async () => {
    const call = caller(ctx, user);
    const endpoint = await createEndpoint(ctx, user, { url: `${receiver.url}/errors` });
    const now = ctx.clock.now();
    for (const operation of ['recover', 'replay']) {
      const url = `/api/event-webhooks/${endpoint.id}/${operation}`;
      for (const body of [
        { since: new Date(now - 31 * DAY).toISOString() },
        { since: new Date(now - HOUR).toISOString(), until: new Date(now - 2 * HOUR).toISOString() },
        { since: 'yesterday' },
        {},
        { since: new Date(now).toISOString(), extra: 1 },
      ]) {
        const response = await call('POST', url, body);
        assert.equal(response.statusCode, 400, `${operation} ${JSON.stringify(body)}`);
        assert.equal(response.json().code, 'invalid_request');
      }
      const unknown = await call('POST', `/api/event-webhooks/ep_01jdnotthere000000000000000/${operation}`, { since: new Date(now - HOUR).toISOString() });
      assert.equal(unknown.statusCode, 404);
      const stranger = await registerUser(ctx);
      assert.equal((await caller(ctx, stranger)('POST', url, { since: new Date(now - HOUR).toISOString() })).statusCode, 404);
    }
  });
});

describe('auto-disable', () => {
  let ctx: TestContext;
  let user: TestUser;
  let dead: Receiver;
  let flaky: Receiver;

  before(async () => {
    // No lane probing here: with the clock standing still between steps, a probing lane gets one probe
    // per step where a real one gets one a second, and a failed probe fails the day's one acceptable
    // event unsent, at random. Probing has its own tests (delivery-operations); this one is the failing clock.
    ctx = await createTestApp({ buildOptions: { deliveryOptions: { probeAfterFailures: Infinity } } });
    user = await registerUser(ctx);
    dead = await startReceiver(() => ({ status: 500 }));
    // Succeeds for events marked ok, fails the rest.
    flaky = await startReceiver((request) => (request.body.includes('"ok":true') ? { status: 200 } : { status: 500 }));
  });
  after(async () => {
    await dead.close();
    await flaky.close();
    await ctx.close();
  });

  test('an endpoint failing for five days is disabled with both mails sent and stops being attempted; one that succeeds once a day is not', async () => {
    const call = caller(ctx, user);
    const failing = await createEndpoint(ctx, user, { url: `${dead.url}/dead`, events: ['machine.error'] });
    const succeedsDaily = await createEndpoint(ctx, user, { url: `${flaky.url}/flaky`, events: ['machine.error'] });
    const start = ctx.clock.now();
    // The mails about the failing endpoint (the flaky one may be warned too: a day can pass between its successes).
    const subjects = () => ctx.smtp.to(user.email).filter((mail) => mail.text.includes(failing.id)).map((mail) => mail.subject);
    let warnedAt: number | undefined;
    // Every 6 hours: an event that fails everywhere; once a day, an event the flaky one accepts.
    for (let t = 0; t < 5 * DAY; t += 6 * HOUR) {
      ctx.clock.set(start + t);
      await emit(ctx, user.id, 'machine.error', { machine: {}, detail: { ok: t % DAY === 12 * HOUR } });
      await ctx.app.jobs.drain();
      if (warnedAt === undefined && subjects().includes('Your webhook endpoint is failing')) warnedAt = t;
      const endpoint = (await call('GET', `/api/event-webhooks/${failing.id}`)).json();
      assert.equal(endpoint.enabled, true, `still enabled after ${t / HOUR} h`);
    }
    assert.equal(warnedAt, DAY, 'warned once a fifth of the period had passed');
    ctx.clock.set(start + 5 * DAY);
    await ctx.app.jobs.drain();
    const disabled = (await call('GET', `/api/event-webhooks/${failing.id}`)).json();
    assert.equal(disabled.enabled, false);
    assert.equal(disabled.disabledReason, 'failing');
    assert.equal(disabled.disabledAt, new Date(start + 5 * DAY).toISOString());
    await eventually(() => (subjects().includes('Your webhook endpoint was disabled') ? true : undefined));
    assert.deepEqual(subjects(), ['Your webhook endpoint is failing', 'Your webhook endpoint was disabled'], 'warned once, then told once');
    assert.ok(!ctx.smtp.to(user.email).some((m) => m.subject === 'Your webhook endpoint was disabled' && m.text.includes(succeedsDaily.id)));

    const healthy = (await call('GET', `/api/event-webhooks/${succeedsDaily.id}`)).json();
    assert.equal(healthy.enabled, true);
    assert.equal(healthy.disabledReason, null);

    // Disabled: not attempted any more, its pending deliveries wait, new events make none for it.
    const attemptsBefore = dead.requests.length;
    await emit(ctx, user.id, 'machine.error');
    for (let i = 1; i <= 4; i++) {
      ctx.clock.set(start + 5 * DAY + i * HOUR);
      await ctx.app.jobs.drain();
    }
    assert.equal(dead.requests.length, attemptsBefore);
    const pending = (await deliveriesOf(ctx, user, failing.id)).filter((d) => d.status === 'pending');
    assert.ok(pending.length > 0, 'its pending deliveries wait');

    // The flaky endpoint lives on however long it goes.
    for (let t = 5 * DAY + 6 * HOUR; t <= 8 * DAY; t += 6 * HOUR) {
      ctx.clock.set(start + t);
      await emit(ctx, user.id, 'machine.error', { machine: {}, detail: { ok: t % DAY === 12 * HOUR } });
      await ctx.app.jobs.drain();
    }
    assert.equal((await call('GET', `/api/event-webhooks/${succeedsDaily.id}`)).json().enabled, true);

    // Enabling clears the reason and the clock; its waiting deliveries go on.
    const enabled = await call('PATCH', `/api/event-webhooks/${failing.id}`, { enabled: true });
    assert.equal(enabled.statusCode, 200);
    assert.equal(enabled.json().disabledReason, null);
    assert.equal(enabled.json().disabledAt, null);
    await ctx.app.jobs.drain();
    assert.ok(dead.requests.length > attemptsBefore, 'attempted again once enabled');
    const row = await ctx.app.deps.db.selectFrom('event_endpoints').select(['failing_since', 'warned_at']).where('id', '=', failing.id).executeTakeFirstOrThrow();
    assert.ok(row.warned_at === null, 'the warning is reset');
  });

  test('a manual pause has no reason', async () => {
    const call = caller(ctx, user);
    const endpoint = await createEndpoint(ctx, user, { url: `${dead.url}/paused` });
    const paused = (await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: false })).json();
    assert.equal(paused.enabled, false);
    assert.equal(paused.disabledReason, null);
    assert.equal(paused.disabledAt, null);
  });
});
