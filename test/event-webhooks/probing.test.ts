import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';

const PROBE_INTERVAL_MS = 300;

/** A failing endpoint is probed, one attempt at a time, until it answers again; nothing is skipped. */
describe('a failing endpoint is probed, not stormed', () => {
  let ctx: TestContext;
  let user: TestUser;
  let hook: Receiver;
  let healthy = false;

  before(async () => {
    ctx = await createTestApp({
      realClock: true,
      env: { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_DELAYS: '20ms', WEBHOOK_MAX_ATTEMPTS: '20' },
      buildOptions: { deliveryOptions: { probeIntervalMs: PROBE_INTERVAL_MS }, runnerOptions: { pollIntervalMs: 50 } },
    });
    user = await registerUser(ctx);
    // Failures take a moment, as a struggling receiver's do: the lane stays busy while the events are emitted, instead of idling (and forgetting its failures) between them.
    hook = await startReceiver(() => (healthy ? { status: 200 } : { status: 503, delayMs: 50 }));
  });
  after(async () => {
    await hook.close();
    await ctx.close();
  });

  test('after a lane of failures, one attempt per interval; the first success lets the backlog through', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    for (let i = 0; i < 40; i++) await emit(ctx, user.id, 'machine.created');
    await hook.waitFor(16);
    // The attempts already in flight finish; then one attempt per interval.
    await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
    const afterStorm = hook.requests.length;
    assert.ok(afterStorm <= 16 + 5, `${afterStorm} attempts before probing began`);
    await new Promise((resolve) => setTimeout(resolve, 4 * PROBE_INTERVAL_MS));
    const probes = hook.requests.length - afterStorm;
    assert.ok(probes <= 5, `${probes} attempts in ${4 * PROBE_INTERVAL_MS} ms while failing`);
    assert.ok(probes >= 1, 'it keeps probing');

    healthy = true;
    const deliveries = await eventually(async () => {
      const list = await deliveriesOf(ctx, user, endpoint.id);
      return list.length === 40 && list.every((d) => d.status === 'delivered') ? list : undefined;
    }, 10_000, 'every delivery through once the endpoint answers');
    assert.equal(deliveries.length, 40);
    assert.ok(deliveries.every((d) => d.attempts >= 1 && d.attempts <= 20));
  });

  test('changing a probed endpoint (a fixed URL, say) ends the probing at once', async () => {
    healthy = false;
    const broken = await startReceiver(() => ({ status: 500 }));
    const endpoint = await createEndpoint(ctx, user, { url: broken.url, events: ['run.failed'] });
    for (let i = 0; i < 20; i++) await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await broken.waitFor(16);
    healthy = true;
    const fixed = await ctx.app.inject({ method: 'PATCH', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session), payload: { url: hook.url } });
    assert.equal(fixed.statusCode, 200);
    await eventually(async () => {
      const list = await deliveriesOf(ctx, user, endpoint.id);
      return list.every((d) => d.status === 'delivered') ? true : undefined;
    }, 3 * PROBE_INTERVAL_MS, 'delivered at full speed, not one per probe');
    await broken.close();
  });
});

/** Probing must not stretch the retry schedule: every delivery still reaches its last attempt on time. */
describe('a failing endpoint keeps every delivery on its schedule', () => {
  let ctx: TestContext;
  let user: TestUser;
  let hook: Receiver;

  before(async () => {
    ctx = await createTestApp({
      realClock: true,
      env: { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_DELAYS: '100ms', WEBHOOK_MAX_ATTEMPTS: '3' },
      buildOptions: { deliveryOptions: { probeIntervalMs: 100 }, runnerOptions: { pollIntervalMs: 50 } },
    });
    user = await registerUser(ctx);
    hook = await startReceiver(() => ({ status: 503, delayMs: 20 }));
  });
  after(async () => {
    await hook.close();
    await ctx.close();
  });

  test('each delivery is failed after WEBHOOK_MAX_ATTEMPTS attempts, most of them made without a connection and saying so', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: hook.url });
    for (let i = 0; i < 30; i++) await emit(ctx, user.id, 'machine.created');
    const deliveries = await eventually(async () => {
      const list = await deliveriesOf(ctx, user, endpoint.id);
      return list.length === 30 && list.every((d) => d.status === 'failed') ? list : undefined;
    }, 15_000, 'every delivery failed');
    assert.ok(deliveries.every((d) => d.attempts === 3 && d.nextAttemptAt === null), 'exactly WEBHOOK_MAX_ATTEMPTS each');
    assert.ok(hook.requests.length < 30 * 3 / 2, `${hook.requests.length} connections for ${30 * 3} attempts: the failing endpoint was not stormed`);
    const unsent = deliveries.filter((d) => d.lastResponse?.error?.startsWith('not sent: the endpoint failed its last'));
    assert.ok(unsent.length > 0, 'attempts made without a connection say so');
    assert.ok(unsent.every((d) => d.lastResponse?.status === null && d.lastResponse?.body === null));
    // Counted once the settling transaction has committed: the listing above can see a failure a moment before.
    const metrics = await eventually(async () => {
      const body = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
      return /^webhook_deliveries_total\{status="failed"\} 30$/m.test(body) ? body : undefined;
    }, 5000, 'the 30 failed deliveries counted, once each');
    const notSent = Number(/^webhook_delivery_attempts_total\{outcome="not_sent"\} (\d+)$/m.exec(metrics)?.[1]);
    assert.ok(notSent >= unsent.length, `not_sent attempts are counted (${notSent})`);
  });
});
