import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { eventually, receiverPool } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';

describe('the deliveries listing and retry', () => {
  let ctx: TestContext;
  const receivers = receiverPool();
  const list = (user: TestUser, query: string) => ctx.app.inject({ method: 'GET', url: `/api/event-webhooks/deliveries?${query}`, headers: asSession(user.session) });

  before(async () => {
    ctx = await createTestApp({ realClock: true, env: { WEBHOOK_TIMEOUT_MS: '500', WEBHOOK_RETRY_DELAYS: '50ms', WEBHOOK_MAX_ATTEMPTS: '1' } });
  });
  after(async () => {
    await receivers.closeAll();
    await ctx.close();
  });

  test('pages newest first with limit and cursor, across endpoints, and never shows another account\'s deliveries', async () => {
    const owner = await registerUser(ctx);
    const stranger = await registerUser(ctx);
    const hook = await receivers.start();
    const first = await createEndpoint(ctx, owner, { url: hook.url });
    const second = await createEndpoint(ctx, owner, { url: hook.url, events: ['machine.stopped'] });
    await createEndpoint(ctx, stranger, { url: hook.url });
    await emit(ctx, owner.id, 'machine.created');
    await emit(ctx, owner.id, 'machine.stopped');
    await emit(ctx, stranger.id, 'machine.created');
    await emit(ctx, owner.id, 'machine.destroyed');
    await hook.waitFor(5);

    const pages: Array<{ data: Array<{ id: string; endpointId: string }>; nextCursor: string | null }> = [];
    let cursor: string | null = null;
    do {
      const response = await list(owner, `limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(response.statusCode, 200);
      pages.push(response.json());
      cursor = pages.at(-1)!.nextCursor;
    } while (cursor !== null);
    const ids = pages.flatMap((page) => page.data.map((d) => d.id));
    assert.deepEqual(pages.map((page) => page.data.length), [2, 2]);
    assert.equal(new Set(ids).size, 4, 'my four deliveries, each once');
    assert.deepEqual(ids, [...ids].sort().reverse(), 'newest first');
    assert.ok(pages.flatMap((page) => page.data).every((d) => d.endpointId === first.id || d.endpointId === second.id));

    const filtered = (await list(owner, `endpoint=${second.id}`)).json();
    assert.deepEqual(filtered.data.map((d: { endpointId: string }) => d.endpointId), [second.id]);
    assert.equal((await list(stranger, `endpoint=${first.id}`)).statusCode, 404, "another account's endpoint is unknown");
    assert.equal((await list(stranger, '')).json().data.length, 1);
  });

  test('a failed delivery retried while its endpoint is paused waits, then goes when it is resumed', async () => {
    const owner = await registerUser(ctx);
    let accept = false;
    const hook = await receivers.start(() => ({ status: accept ? 200 : 500 }));
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    await emit(ctx, owner.id, 'machine.created');
    const failed = await eventually(async () => (await deliveriesOf(ctx, owner, endpoint.id)).find((d) => d.status === 'failed'));
    const call = (method: 'POST' | 'PATCH', url: string, payload?: object) => ctx.app.inject({ method, url, headers: asSession(owner.session), ...(payload ? { payload } : {}) });
    assert.equal((await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: false })).statusCode, 200);
    accept = true;
    const retried = await call('POST', `/api/event-webhooks/deliveries/${failed.id}/retry`);
    assert.equal(retried.statusCode, 202);
    assert.equal(retried.json().status, 'pending');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(hook.requests.length, 1, 'held while paused');
    await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: true });
    const delivered = await eventually(async () => (await deliveriesOf(ctx, owner, endpoint.id)).find((d) => d.status === 'delivered'));
    assert.equal(delivered.id, failed.id);
    assert.equal(delivered.attempts, 2);
    assert.equal(hook.requests.length, 2);
  });

  test('an attempt carries the spec headers and nothing else of ours', async () => {
    const owner = await registerUser(ctx);
    const hook = await receivers.start();
    const endpoint = await createEndpoint(ctx, owner, { url: hook.url });
    await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(owner.session) });
    const [request] = await hook.waitFor(1);
    // Spec 6.2's four, the transport's own, and a user agent naming the sender.
    assert.deepEqual(Object.keys(request!.headers).sort(), ['connection', 'content-length', 'content-type', 'host', 'service-delivery', 'service-event', 'service-signature', 'user-agent']);
    assert.match(String(request!.headers['user-agent']), /^MachinePlatform-Webhooks\//);
  });
});
