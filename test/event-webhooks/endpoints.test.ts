import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { EVENT_TYPES } from '../../src/events/event-types.ts';
import { asBearer, asSession, createApiKey, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';

const URL_OK = 'https://hooks.example.com/machine-events';

describe('event webhook endpoints API', () => {
  let ctx: TestContext;
  let user: TestUser;
  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
  });
  after(() => ctx.close());

  const as = (who: TestUser) => (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
    ctx.app.inject({ method, url, headers: asSession(who.session), ...(payload !== undefined ? { payload: payload as object } : {}) });

  test('create returns the endpoint with its secret once; reads never show the secret', async () => {
    const call = as(user);
    const created = await call('POST', '/api/event-webhooks', { url: URL_OK, events: ['machine.created', 'run.failed'], description: 'prod' });
    assert.equal(created.statusCode, 201);
    const body = created.json();
    assert.deepEqual(Object.keys(body).sort(), ['createdAt', 'description', 'disabledAt', 'disabledReason', 'enabled', 'events', 'id', 'secret', 'updatedAt', 'url']);
    assert.match(body.id, /^ep_[0-9a-z]{26}$/);
    assert.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(body.secret.slice(6), 'base64').length, 32);
    assert.deepEqual(body.events, ['machine.created', 'run.failed']);
    assert.equal(body.enabled, true);
    assert.equal(body.description, 'prod');

    const one = await call('GET', `/api/event-webhooks/${body.id}`);
    const { secret: _secret, ...withoutSecret } = body;
    assert.deepEqual(one.json(), withoutSecret);
    const list = await call('GET', '/api/event-webhooks');
    assert.deepEqual(list.json().data.find((e: { id: string }) => e.id === body.id), withoutSecret);
    const patched = await call('PATCH', `/api/event-webhooks/${body.id}`, { description: 'staging' });
    assert.equal(patched.json().secret, undefined);
    for (const response of [one, list, patched]) assert.ok(!response.body.includes(body.secret));
  });

  test('defaults: events ["*"], description empty, enabled', async () => {
    const created = await as(user)('POST', '/api/event-webhooks', { url: URL_OK });
    assert.deepEqual(created.json().events, ['*']);
    assert.equal(created.json().description, '');
    assert.equal(created.json().enabled, true);
  });

  test('bad input is a 400 that creates nothing', async () => {
    const call = as(user);
    const before = (await call('GET', '/api/event-webhooks')).json().data.length;
    const cases: Array<[string, unknown]> = [
      ['http url', { url: 'http://hooks.example.com/x' }],
      ['relative url', { url: '/hooks' }],
      ['not a url', { url: 'hooks example' }],
      ['ftp url', { url: 'ftp://hooks.example.com/x' }],
      ['url with credentials', { url: 'https://user:pw@hooks.example.com/x' }],
      ['url too long', { url: `https://hooks.example.com/${'a'.repeat(2030)}` }],
      ['missing url', { events: ['*'] }],
      ['empty events', { url: URL_OK, events: [] }],
      ['unknown event type', { url: URL_OK, events: ['machine.exploded'] }],
      ['events not an array', { url: URL_OK, events: 'machine.created' }],
      ['description too long', { url: URL_OK, description: 'd'.repeat(501) }],
      ['unknown field', { url: URL_OK, secret: 'whsec_mine' }],
      ['enabled on create', { url: URL_OK, enabled: false }],
    ];
    for (const [label, payload] of cases) {
      const response = await call('POST', '/api/event-webhooks', payload);
      assert.equal(response.statusCode, 400, label);
      assert.equal(response.json().code, 'invalid_request', label);
    }
    assert.equal((await call('GET', '/api/event-webhooks')).json().data.length, before);
  });

  test('a URL of exactly 2,048 characters and a 500-character description are accepted', async () => {
    const url = `https://hooks.example.com/${'a'.repeat(2048 - 'https://hooks.example.com/'.length)}`;
    const response = await as(user)('POST', '/api/event-webhooks', { url, description: 'd'.repeat(500) });
    assert.equal(response.statusCode, 201);
    assert.equal(response.json().url, url);
  });

  test('the 11th endpoint is 409 limit_reached, also when created concurrently', async () => {
    const owner = await registerUser(ctx);
    const call = as(owner);
    const results = await Promise.all(Array.from({ length: 14 }, (_, i) => call('POST', '/api/event-webhooks', { url: `${URL_OK}/${i}` })));
    const statuses = results.map((r) => r.statusCode).sort();
    assert.equal(statuses.filter((s) => s === 201).length, 10);
    assert.equal(statuses.filter((s) => s === 409).length, 4);
    const refused = results.find((r) => r.statusCode === 409)!;
    assert.equal(refused.json().code, 'limit_reached');
    assert.equal((await call('GET', '/api/event-webhooks')).json().data.length, 10);
    const [first] = (await call('GET', '/api/event-webhooks')).json().data;
    assert.equal((await call('DELETE', `/api/event-webhooks/${first.id}`)).statusCode, 204);
    assert.equal((await call('POST', '/api/event-webhooks', { url: URL_OK })).statusCode, 201, 'room again after a delete');
  });

  test('PATCH changes any field, validates like create, and refuses an empty body', async () => {
    const call = as(user);
    const { id, updatedAt } = (await call('POST', '/api/event-webhooks', { url: URL_OK })).json();
    const changed = await call('PATCH', `/api/event-webhooks/${id}`, { url: `${URL_OK}/v2`, events: ['machine.expired'], description: 'new', enabled: false });
    assert.equal(changed.statusCode, 200);
    assert.equal(changed.json().url, `${URL_OK}/v2`);
    assert.deepEqual(changed.json().events, ['machine.expired']);
    assert.equal(changed.json().enabled, false);
    assert.ok(changed.json().updatedAt >= updatedAt);
    for (const payload of [{}, { url: 'http://x.example.com' }, { events: [] }, { enabled: 'false' }, { enabled: 0 }, { other: 1 }]) {
      const response = await call('PATCH', `/api/event-webhooks/${id}`, payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
    }
    assert.deepEqual((await call('GET', `/api/event-webhooks/${id}`)).json(), changed.json());
  });

  test("another account's endpoint ids are 404 on every route, and nothing changes", async () => {
    const owner = await registerUser(ctx);
    const stranger = await registerUser(ctx);
    const { id } = (await as(owner)('POST', '/api/event-webhooks', { url: URL_OK })).json();
    const call = as(stranger);
    for (const [method, url, payload] of [
      ['GET', `/api/event-webhooks/${id}`],
      ['PATCH', `/api/event-webhooks/${id}`, { enabled: false }],
      ['POST', `/api/event-webhooks/${id}/rotate-secret`],
      ['POST', `/api/event-webhooks/${id}/test`],
      ['DELETE', `/api/event-webhooks/${id}`],
      ['GET', `/api/event-webhooks/deliveries?endpoint=${id}`],
    ] as const) {
      const response = await call(method, url, payload);
      assert.equal(response.statusCode, 404, `${method} ${url}`);
      assert.equal(response.json().code, 'not_found');
    }
    assert.equal((await call('GET', '/api/event-webhooks')).json().data.length, 0);
    const mine = await as(owner)('GET', `/api/event-webhooks/${id}`);
    assert.equal(mine.json().enabled, true);
  });

  test('unknown ids are 404 and deleting twice is 404', async () => {
    const call = as(user);
    assert.equal((await call('GET', '/api/event-webhooks/ep_00000000000000000000000000')).statusCode, 404);
    const { id } = (await call('POST', '/api/event-webhooks', { url: URL_OK })).json();
    assert.equal((await call('DELETE', `/api/event-webhooks/${id}`)).statusCode, 204);
    assert.equal((await call('DELETE', `/api/event-webhooks/${id}`)).statusCode, 404);
    assert.equal((await call('GET', `/api/event-webhooks/${id}`)).statusCode, 404);
  });

  test('rotate-secret answers only the new secret', async () => {
    const call = as(user);
    const { id, secret } = (await call('POST', '/api/event-webhooks', { url: URL_OK })).json();
    const rotated = await call('POST', `/api/event-webhooks/${id}/rotate-secret`);
    assert.deepEqual(Object.keys(rotated.json()), ['secret']);
    assert.notEqual(rotated.json().secret, secret);
    const row = await ctx.app.deps.db.selectFrom('event_endpoints').select('secret').where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.secret, rotated.json().secret);
  });

  test('the event-type catalog lists every type of spec 6.1 (and CONTRACT 20) with a description', async () => {
    const response = await as(user)('GET', '/api/event-webhooks/event-types');
    assert.equal(response.statusCode, 200);
    const types = response.json().data as Array<{ type: string; description: string }>;
    assert.deepEqual(types.map((t) => t.type), Object.keys(EVENT_TYPES));
    assert.equal(types.length, 11, 'spec 6.1\'s nine, and CONTRACT 20\'s machine.paused and machine.resumed');
    for (const type of ['machine.paused', 'machine.resumed']) assert.ok(types.some((t) => t.type === type), type);
    assert.ok(types.every((t) => t.description.length > 10));
  });

  test('lists paginate with limit and cursor; a limit out of 1..100 is 400', async () => {
    const owner = await registerUser(ctx);
    const call = as(owner);
    for (let i = 0; i < 5; i++) await call('POST', '/api/event-webhooks', { url: `${URL_OK}/${i}` });
    const first = (await call('GET', '/api/event-webhooks?limit=2')).json();
    assert.equal(first.data.length, 2);
    assert.ok(first.nextCursor);
    const second = (await call('GET', `/api/event-webhooks?limit=2&cursor=${first.nextCursor}`)).json();
    const third = (await call('GET', `/api/event-webhooks?limit=2&cursor=${second.nextCursor}`)).json();
    assert.equal(third.data.length, 1);
    assert.equal(third.nextCursor, null);
    const ids = [...first.data, ...second.data, ...third.data].map((e: { id: string }) => e.id);
    assert.equal(new Set(ids).size, 5);
    assert.deepEqual(ids, [...ids].sort().reverse(), 'newest first');
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'cursor=bogus', 'other=1']) {
      assert.equal((await call('GET', `/api/event-webhooks?${query}`)).statusCode, 400, query);
      assert.equal((await call('GET', `/api/event-webhooks/deliveries?${query}`)).statusCode, 400, query);
    }
  });

  test('rotate-secret, test, retry and DELETE take no body: fields are 400 and nothing changes', async () => {
    const owner = await registerUser(ctx);
    const call = as(owner);
    const endpoint = (await call('POST', '/api/event-webhooks', { url: URL_OK })).json();
    for (const url of [`/api/event-webhooks/${endpoint.id}/rotate-secret`, `/api/event-webhooks/${endpoint.id}/test`, '/api/event-webhooks/deliveries/dlv_00000000000000000000000000/retry']) {
      const response = await call('POST', url, { secret: 'whsec_mine' });
      assert.equal(response.statusCode, 400, url);
      assert.equal(response.json().code, 'invalid_request');
    }
    assert.equal((await call('DELETE', `/api/event-webhooks/${endpoint.id}`, { force: true })).statusCode, 400);
    assert.equal((await call('GET', `/api/event-webhooks/${endpoint.id}`)).statusCode, 200, 'still there');
    assert.equal((await call('GET', '/api/event-webhooks/deliveries')).json().data.length, 0, 'no test was sent');
    assert.equal((await call('POST', `/api/event-webhooks/${endpoint.id}/rotate-secret`, {})).statusCode, 200);
    assert.equal((await call('DELETE', `/api/event-webhooks/${endpoint.id}`)).statusCode, 204);
  });

  test('needs a credential: none is 401, an API key works', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/api/event-webhooks' });
    assert.equal(response.statusCode, 401);
    const key = await createApiKey(ctx, user);
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/event-webhooks', headers: asBearer(key) })).statusCode, 200);
  });
});
