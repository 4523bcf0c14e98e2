import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MINUTE, SECOND } from '../../src/shared/clock.ts';
import { recordApiKeyUse } from '../../src/api-keys/api-keys.repository.ts';
import { asBearer, asSession, createApiKey, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { assertNoStoredSecretInResponses } from '../support/leaks.ts';
import { assertProblem } from '../support/problem.ts';
import { breakChecksum, hasValidChecksum } from '../support/tokens.ts';

interface KeyView {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

describe('API keys', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const create = (headers: Record<string, string>, payload: unknown) =>
    ctx.app.inject({ method: 'POST', url: '/api/keys', headers, payload: payload as object });
  const list = (headers: Record<string, string>, query = '') => ctx.app.inject({ method: 'GET', url: `/api/keys${query}`, headers });
  const revoke = (headers: Record<string, string>, id: string) => ctx.app.inject({ method: 'DELETE', url: `/api/keys/${id}`, headers });
  const me = (key: string) => ctx.app.inject({ method: 'GET', url: '/api/me', headers: asBearer(key) });
  const keysOf = async (user: TestUser): Promise<KeyView[]> => (await list(asSession(user.session))).json().data;

  test('create answers 201 {id, name, key, createdAt}; the key is tmk_ + 38 base62 characters with a valid checksum', async () => {
    const user = await registerUser(ctx);
    const response = await create(asSession(user.session), { name: '  deploy bot  ' });
    assert.equal(response.statusCode, 201);
    const body = response.json();
    assert.deepEqual(Object.keys(body).sort(), ['createdAt', 'id', 'key', 'name']);
    assert.match(body.id, /^key_[0-9a-z]{26}$/);
    assert.equal(body.name, 'deploy bot');
    assert.equal(body.createdAt, new Date(ctx.clock.now()).toISOString());
    assert.match(body.key, /^tmk_[0-9A-Za-z]{38}$/);
    assert.ok(hasValidChecksum(body.key, 'tmk_'), 'the last 6 characters are the CRC32 of the 32 before them');

    const again = (await create(asSession(user.session), { name: 'deploy bot' })).json();
    assert.notEqual(again.key, body.key);
    assert.notEqual(again.id, body.id);
  });

  test('the list shows exactly {id, name, prefix, createdAt, lastUsedAt}, prefix being the first 8 characters; the key never appears again', async () => {
    const user = await registerUser(ctx);
    const created = (await create(asSession(user.session), { name: 'ci' })).json();
    const response = await list(asSession(user.session));
    assert.equal(response.statusCode, 200);
    const { data, nextCursor } = response.json();
    assert.equal(nextCursor, null);
    assert.equal(data.length, 1);
    assert.deepEqual(Object.keys(data[0]).sort(), ['createdAt', 'id', 'lastUsedAt', 'name', 'prefix']);
    assert.deepEqual(data[0], { id: created.id, name: 'ci', prefix: created.key.slice(0, 8), createdAt: created.createdAt, lastUsedAt: null });
    assert.ok(!response.body.includes(created.key));
    assert.ok(!response.body.includes(created.key.slice(8)));

    // Nor in any later answer, including those to requests made with the key itself.
    const seen = ctx.responses.length;
    await me(created.key);
    await list(asBearer(created.key));
    for (const body of ctx.responses.slice(seen)) assert.ok(!body.includes(created.key.slice(8)), 'the key leaked into a response');
  });

  test('lastUsedAt is null until the key is used, then set, and written at most once a minute', async () => {
    const user = await registerUser(ctx);
    const key = await createApiKey(ctx, user);
    const usedAt = () => keysOf(user).then((keys) => keys[0]!.lastUsedAt);
    assert.equal(await usedAt(), null, 'creating and listing with the cookie is no use of the key');

    const first = ctx.clock.now();
    assert.equal((await me(key)).statusCode, 200);
    assert.equal(await usedAt(), new Date(first).toISOString());

    ctx.clock.advance(59 * SECOND);
    assert.equal((await me(key)).statusCode, 200);
    assert.equal(await usedAt(), new Date(first).toISOString(), 'not written again within the minute');

    ctx.clock.advance(SECOND);
    assert.equal((await me(key)).statusCode, 200);
    assert.equal(await usedAt(), new Date(first + 60 * SECOND).toISOString());
  });

  test('DELETE answers 204 and the key fails at once with 401; other keys are revoked independently', async () => {
    const user = await registerUser(ctx);
    const keys = [await createApiKey(ctx, user, 'a'), await createApiKey(ctx, user, 'b'), await createApiKey(ctx, user, 'c')];
    for (const key of keys) assert.equal((await me(key)).statusCode, 200);
    const ids = new Map((await keysOf(user)).map((k) => [k.name, k.id]));

    const response = await revoke(asSession(user.session), ids.get('b')!);
    assert.equal(response.statusCode, 204);
    assert.equal(response.body, '');
    const refused = await me(keys[1]!);
    assertProblem(refused, 401, 'unauthenticated');
    assert.match(String(refused.headers['www-authenticate']), /^Bearer/);
    assert.equal((await me(keys[0]!)).statusCode, 200);
    assert.equal((await me(keys[2]!)).statusCode, 200);
    assert.deepEqual((await keysOf(user)).map((k) => k.name).sort(), ['a', 'c']);

    assert.equal((await revoke(asSession(user.session), ids.get('a')!)).statusCode, 204);
    assertProblem(await me(keys[0]!), 401, 'unauthenticated');
    assert.equal((await me(keys[2]!)).statusCode, 200);
    assertProblem(await revoke(asSession(user.session), ids.get('a')!), 404, 'not_found');
  });

  test("another account's key id and an unknown id are 404 not_found; nobody sees another account's keys", async () => {
    const owner = await registerUser(ctx);
    const stranger = await registerUser(ctx);
    const key = await createApiKey(ctx, owner);
    const [view] = await keysOf(owner);
    assertProblem(await revoke(asSession(stranger.session), view!.id), 404, 'not_found');
    assertProblem(await revoke(asBearer(await createApiKey(ctx, stranger)), view!.id), 404, 'not_found');
    assert.equal((await me(key)).statusCode, 200, 'the key still works');
    assert.ok(!(await keysOf(stranger)).some((k) => k.id === view!.id));
    assertProblem(await revoke(asSession(owner.session), 'key_01jz0000000000000000000000'), 404, 'not_found');
    assertProblem(await revoke(asSession(owner.session), 'whatever'), 404, 'not_found');
  });

  test('keys can be created, listed and revoked with an API key as well as with the cookie', async () => {
    const user = await registerUser(ctx);
    const first = await createApiKey(ctx, user, 'first');
    const created = await create(asBearer(first), { name: 'second' });
    assert.equal(created.statusCode, 201);
    const second = created.json();
    assert.ok(hasValidChecksum(second.key, 'tmk_'));
    const listed = await list(asBearer(first));
    assert.equal(listed.statusCode, 200);
    assert.deepEqual(listed.json().data.map((k: KeyView) => k.name).sort(), ['first', 'second']);

    assert.equal((await revoke(asBearer(first), second.id)).statusCode, 204);
    assertProblem(await me(second.key), 401, 'unauthenticated');
    const firstId = (await keysOf(user)).find((k) => k.name === 'first')!.id;
    assert.equal((await revoke(asBearer(first), firstId)).statusCode, 204, 'a key can revoke itself');
    assertProblem(await me(first), 401, 'unauthenticated');
    assert.deepEqual(await keysOf(user), []);
  });

  test('blank, over-long, missing, mistyped names and unknown fields are 400 invalid_request', async () => {
    const user = await registerUser(ctx);
    const cases: unknown[] = [{ name: '' }, { name: '   ' }, { name: 'x'.repeat(101) }, {}, { name: 7 }, { name: 'ok', scope: 'admin' }, [], null];
    for (const payload of cases) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/keys',
        headers: { ...asSession(user.session), 'content-type': 'application/json' },
        payload: JSON.stringify(payload),
      });
      assertProblem(response, 400, 'invalid_request');
    }
    assert.equal((await create(asSession(user.session), { name: 'x'.repeat(100) })).statusCode, 201);
    assert.equal((await keysOf(user)).length, 1, 'only the valid request created a key');
  });

  test('a broken checksum, an unknown key, a malformed header or another scheme are 401', async () => {
    const user = await registerUser(ctx);
    const key = await createApiKey(ctx, user);
    const broken = breakChecksum(key);
    assert.ok(!hasValidChecksum(broken, 'tmk_'));
    assertProblem(await me(broken), 401, 'unauthenticated');
    const otherBody = key.slice(0, 5) + (key[5] === 'a' ? 'b' : 'a') + key.slice(6);
    assertProblem(await me(otherBody), 401, 'unauthenticated');
    for (const authorization of [`Basic ${Buffer.from(`x:${key}`).toString('base64')}`, 'Bearer', `Bearer ${key} extra`, `Token ${key}`, `Bearer ${key.slice(0, -1)}`]) {
      const response = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { authorization } });
      assertProblem(response, 401, 'unauthenticated');
      assert.match(String(response.headers['www-authenticate']), /^Bearer/);
    }
    const lowercaseScheme = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { authorization: `bearer ${key}` } });
    assert.equal(lowercaseScheme.statusCode, 200, 'the scheme is case-insensitive (RFC 9110)');
    assertProblem(await list({}), 401, 'unauthenticated');
  });

  test('lists page with limit and cursor, newest first', async () => {
    const user = await registerUser(ctx);
    for (const name of ['k1', 'k2', 'k3']) await createApiKey(ctx, user, name);
    const firstPage = (await list(asSession(user.session), '?limit=2')).json();
    assert.deepEqual(firstPage.data.map((k: KeyView) => k.name), ['k3', 'k2']);
    assert.equal(typeof firstPage.nextCursor, 'string');
    const secondPage = (await list(asSession(user.session), `?limit=2&cursor=${firstPage.nextCursor}`)).json();
    assert.deepEqual(secondPage.data.map((k: KeyView) => k.name), ['k1']);
    assert.equal(secondPage.nextCursor, null);
    assertProblem(await list(asSession(user.session), '?limit=0'), 400, 'invalid_request');
    assertProblem(await list(asSession(user.session), '?limit=101'), 400, 'invalid_request');
  });

  test('the database holds only the SHA-256 of each key; the raw key is nowhere in api_keys', async () => {
    const user = await registerUser(ctx);
    const keys = [await createApiKey(ctx, user, 'one'), await createApiKey(ctx, user, 'two')];
    const rows = await ctx.app.deps.db.selectFrom('api_keys').selectAll().where('account_id', '=', user.id).execute();
    assert.equal(rows.length, 2);
    const stored = JSON.stringify(rows);
    for (const key of keys) {
      assert.ok(!stored.includes(key), 'a raw key is stored');
      assert.ok(!stored.includes(key.slice(8)), 'the secret part of a key is stored');
      const row = rows.find((r) => r.token_hash === createHash('sha256').update(key).digest('hex'));
      assert.ok(row, 'the key is found by its SHA-256');
      assert.equal(row.prefix, key.slice(0, 8));
    }
  });

  test('DELETE with a body of unknown fields is 400 and revokes nothing; no body or {} revokes', async () => {
    // Regression: DELETE /api/keys/{id} had no body schema and accepted any JSON, ignoring it.
    const user = await registerUser(ctx);
    const key = await createApiKey(ctx, user);
    const [first] = await keysOf(user);
    const withBody = (payload: string) =>
      ctx.app.inject({ method: 'DELETE', url: `/api/keys/${first!.id}`, headers: { ...asSession(user.session), 'content-type': 'application/json' }, payload });
    assertProblem(await withBody('{"force":true}'), 400, 'invalid_request');
    assertProblem(await withBody('[]'), 400, 'invalid_request');
    assert.equal((await me(key)).statusCode, 200, 'the key still works');
    assert.equal((await withBody('{}')).statusCode, 204);
    assert.equal((await me(key)).statusCode, 401);
  });

  test('lastUsedAt is written only when the stored value is over a minute old, whichever process writes', async () => {
    // Regression: the once-a-minute rule lived in each process's memory, so several processes each wrote it every minute.
    const user = await registerUser(ctx);
    await createApiKey(ctx, user);
    const [key] = await keysOf(user);
    const start = ctx.clock.now();
    const stored = async () => (await ctx.app.deps.db.selectFrom('api_keys').select('last_used_at').where('id', '=', key!.id).executeTakeFirstOrThrow()).last_used_at;
    assert.equal(await recordApiKeyUse(ctx.app.deps.db, key!.id, start, MINUTE), true);
    // Another process, whose memory still says "never used", uses the key 30 s later.
    assert.equal(await recordApiKeyUse(ctx.app.deps.db, key!.id, start + 30 * SECOND, MINUTE), false);
    assert.equal(await stored(), start);
    assert.equal(await recordApiKeyUse(ctx.app.deps.db, key!.id, start + MINUTE, MINUTE), true);
    assert.equal(await stored(), start + MINUTE);
  });

  test('no response carried a password hash or a stored token hash', () => assertNoStoredSecretInResponses(ctx));
});
