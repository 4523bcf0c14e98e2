import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { asBearer, asSession, createApiKey, createTestApp, PUBLIC_URL, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';

const ONE_MIB = 1024 * 1024;
const INTERNALS = /kysely|sqlite|postgres|relation|no such table|select |driver|destroyed|stack|node_modules|\.ts:\d|Error:/i;

describe('errors are RFC 9457 problem+json', () => {
  let ctx: TestContext;
  let user: TestUser;
  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
  });
  after(() => ctx.close());

  const json = (method: 'POST' | 'GET' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    ctx.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  const raw = (url: string, contentType: string, body: string, headers: Record<string, string> = {}) =>
    ctx.app.inject({ method: 'POST', url, headers: { 'content-type': contentType, ...headers }, payload: body });

  test('400 invalid_request: schema violations', async () => {
    assertProblem(await json('POST', '/api/auth/login', {}), 400, 'invalid_request');
    assertProblem(await json('POST', '/api/auth/login', { email: 'a@example.com', password: 'x', remember: true }), 400, 'invalid_request');
    assertProblem(await json('POST', '/api/auth/login', { email: ['a@example.com'], password: 'x' }), 400, 'invalid_request');
    assertProblem(await json('GET', '/api/keys?limit=abc', undefined, asSession(user.session)), 400, 'invalid_request');
  });

  test('400 invalid_request: malformed or empty JSON, and JSON that is not an object', async () => {
    for (const body of ['{"email":', '{email: "a@example.com"}', "{'a':1}", '', 'null', '[]', '"text"', '42']) {
      assertProblem(await raw('/api/auth/login', 'application/json', body), 400, 'invalid_request');
    }
  });

  test('401 unauthenticated, with WWW-Authenticate: Bearer', async () => {
    const response = await json('GET', '/api/me');
    assertProblem(response, 401, 'unauthenticated');
    assert.match(String(response.headers['www-authenticate']), /^Bearer/);
    assertProblem(await json('POST', '/api/auth/login', { email: user.email, password: 'wrong password' }), 401, 'invalid_credentials');
  });

  test('403 forbidden and 403 cross_site', async () => {
    const key = await createApiKey(ctx, user);
    assertProblem(await json('POST', '/api/me/password', { currentPassword: user.password, newPassword: 'new password' }, asBearer(key)), 403, 'forbidden');
    assertProblem(await json('GET', '/api/me', undefined, { ...asSession(user.session), 'sec-fetch-site': 'cross-site' }), 403, 'cross_site');
  });

  test('404 not_found: unknown routes and unknown ids', async () => {
    for (const [method, url] of [['GET', '/api/does-not-exist'], ['POST', '/nowhere'], ['GET', '/api/keys/extra/segments'], ['DELETE', '/api/me']] as const) {
      const response = await ctx.app.inject({ method, url, headers: asBearer(await createApiKey(ctx, user)) });
      assertProblem(response, 404, 'not_found');
    }
    assertProblem(await json('DELETE', '/api/keys/key_01jz0000000000000000000000', undefined, asSession(user.session)), 404, 'not_found');
  });

  test('an unknown route is 404 without a credential too', async () => {
    // Regression: unknown routes required a credential and answered 401 to anonymous callers.
    assertProblem(await json('GET', '/api/nothing-here'), 404, 'not_found');
    assertProblem(await json('POST', '/nowhere', { a: 1 }), 404, 'not_found');
  });

  test('a malformed percent-encoding or an over-long path segment is a problem+json client error', async () => {
    // Regression: the router's own errors bypassed the error handler and went out as Fastify's plain JSON.
    assertProblem(await json('DELETE', '/api/keys/%ZZ', undefined, asSession(user.session)), 400, 'invalid_request');
    assertProblem(await json('DELETE', `/api/keys/${'x'.repeat(300)}`, undefined, asSession(user.session)), 414, 'invalid_request');
  });

  test('a NUL character in a body, an id or a query string is 400, never a 500', async () => {
    // Regression: PostgreSQL cannot store U+0000 in text, so these failed their query with a 500.
    const key = await createApiKey(ctx, user);
    const cases: Array<[string, Parameters<typeof json>]> = [
      ['login email', ['POST', '/api/auth/login', { email: 'a\u0000@example.com', password: 'long enough' }]],
      ['register email', ['POST', '/api/auth/register', { email: 'a\u0000b@example.com', password: 'long enough', name: 'N' }]],
      ['register name', ['POST', '/api/auth/register', { email: 'nul-name@example.com', password: 'long enough', name: 'N\u0000' }]],
      ['forgot email', ['POST', '/api/auth/forgot', { email: 'a\u0000@example.com' }]],
      ['key name', ['POST', '/api/keys', { name: 'k\u0000' }, asBearer(key)]],
      ['key id', ['DELETE', '/api/keys/%00', undefined, asBearer(key)]],
      ['session id', ['DELETE', '/api/me/sessions/a%00b', undefined, asBearer(key)]],
      ['query', ['GET', '/api/keys?limit=1&cursor=%00', undefined, asBearer(key)]],
    ];
    for (const [label, args] of cases) {
      const response = await json(...args);
      assert.equal(response.statusCode, 400, `${label}: ${response.statusCode} ${response.body}`);
      assertProblem(response, 400, 'invalid_request');
    }
  });

  test('409 email_taken', async () => {
    assertProblem(await json('POST', '/api/auth/register', { email: user.email, password: 'long enough', name: 'Again' }), 409, 'email_taken');
  });

  test('413 payload_too_large: a body over 1 MiB; one just under is read (and judged by its schema)', async () => {
    const envelope = '{"email":"a@example.com","password":""}';
    const over = `{"email":"a@example.com","password":"${'x'.repeat(ONE_MIB - envelope.length + 1)}"}`;
    assert.equal(Buffer.byteLength(over), ONE_MIB + 1);
    assertProblem(await raw('/api/auth/login', 'application/json', over), 413, 'payload_too_large');
    assertProblem(await raw('/api/keys', 'application/json', over, asSession(user.session)), 413, 'payload_too_large');

    const atLimit = `{"email":"a@example.com","password":"${'x'.repeat(ONE_MIB - envelope.length)}"}`;
    assert.equal(Buffer.byteLength(atLimit), ONE_MIB);
    assertProblem(await raw('/api/auth/login', 'application/json', atLimit), 400, 'invalid_request');
  });

  test('415 unsupported_media_type: text/plain, form-encoded and other types on JSON routes', async () => {
    const body = JSON.stringify({ email: user.email, password: user.password });
    for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
      assertProblem(await raw('/api/auth/login', type, body), 415, 'unsupported_media_type');
    }
    assertProblem(await raw('/api/keys', 'text/plain', '{"name":"k"}', asSession(user.session)), 415, 'unsupported_media_type');
    assert.equal((await raw('/api/auth/login', 'application/json; charset=utf-8', body)).statusCode, 200);
  });

  test('429 rate_limited with Retry-After', async () => {
    const email = 'hammered@example.com';
    for (let i = 0; i < 10; i++) await json('POST', '/api/auth/login', { email, password: 'wrong password' });
    const response = await json('POST', '/api/auth/login', { email, password: 'wrong password' });
    assertProblem(response, 429, 'rate_limited');
    assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
  });
});

describe('unexpected failures', () => {
  test('a failing query is a 500 internal_error whose body names no internals', async () => {
    const ctx = await createTestApp();
    try {
      const user = await registerUser(ctx);
      await sql`drop table sessions`.execute(ctx.app.deps.db);
      const response = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(user.session) });
      assertProblem(response, 500, 'internal_error');
      assert.doesNotMatch(response.body, INTERNALS);
      assert.doesNotMatch(response.body, /sessions/);
    } finally {
      await ctx.close();
    }
  });

  test('the database closed under the app is a 500 internal_error whose body names no internals', async () => {
    const ctx = await createTestApp();
    try {
      const user = await registerUser(ctx);
      const key = await createApiKey(ctx, user);
      await ctx.app.deps.db.destroy();
      for (const request of [
        { method: 'GET' as const, url: '/api/me', headers: asBearer(key) },
        { method: 'POST' as const, url: '/api/auth/login', payload: { email: user.email, password: user.password } },
      ]) {
        const response = await ctx.app.inject(request);
        assertProblem(response, 500, 'internal_error');
        assert.doesNotMatch(response.body, INTERNALS);
      }
      const ready = await ctx.app.inject({ method: 'GET', url: '/readyz' });
      assertProblem(ready, 503, 'service_unavailable');
      assert.doesNotMatch(ready.body, INTERNALS);
    } finally {
      await ctx.close();
    }
  });
});

describe('the origin rule for cookie requests (CONTRACT 4)', () => {
  let ctx: TestContext;
  let user: TestUser;
  let key: string;
  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
    key = await createApiKey(ctx, user);
  });
  after(() => ctx.close());

  const cookie = () => ({ cookie: `session=${user.session}` });
  const createKey = (headers: Record<string, string>) =>
    ctx.app.inject({ method: 'POST', url: '/api/keys', headers, payload: { name: 'from origin test' } });
  const keyCount = async () => (await ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asSession(user.session) })).json().data.length;

  test('Sec-Fetch-Site cross-site or same-site is 403 cross_site, even with our Origin, and nothing happens', async () => {
    const before = await keyCount();
    for (const site of ['cross-site', 'same-site']) {
      assertProblem(await createKey({ ...cookie(), 'sec-fetch-site': site }), 403, 'cross_site');
      assertProblem(await createKey({ ...cookie(), 'sec-fetch-site': site, origin: PUBLIC_URL }), 403, 'cross_site');
      assertProblem(await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { ...cookie(), 'sec-fetch-site': site } }), 403, 'cross_site');
    }
    assert.equal(await keyCount(), before);
  });

  test('an Origin other than PUBLIC_URL is 403 cross_site', async () => {
    for (const origin of ['https://evil.example', 'http://localhost:3001', 'https://localhost:3000', 'http://sub.localhost:3000', 'null']) {
      assertProblem(await createKey({ ...cookie(), origin }), 403, 'cross_site');
      assertProblem(await createKey({ ...cookie(), origin, 'sec-fetch-site': 'same-origin' }), 403, 'cross_site');
    }
  });

  test('an unsafe method with neither header is 403 cross_site; a GET with neither passes', async () => {
    assertProblem(await createKey(cookie()), 403, 'cross_site');
    assertProblem(await ctx.app.inject({ method: 'DELETE', url: '/api/keys/key_01jz0000000000000000000000', headers: cookie() }), 403, 'cross_site');
    assertProblem(await ctx.app.inject({ method: 'POST', url: '/api/auth/logout', headers: cookie() }), 403, 'cross_site');
    assertProblem(await ctx.app.inject({ method: 'PUT', url: '/api/me', headers: cookie() }), 403, 'cross_site');
    assertProblem(await ctx.app.inject({ method: 'PATCH', url: '/api/me', headers: cookie() }), 403, 'cross_site');
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: cookie() })).statusCode, 200);
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { ...cookie(), 'sec-fetch-site': 'none' } })).statusCode, 200);
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { ...cookie(), 'sec-fetch-site': 'same-origin' } })).statusCode, 200);
  });

  test('Sec-Fetch-Site same-origin with our Origin passes; so does our Origin alone', async () => {
    assert.equal((await createKey({ ...cookie(), 'sec-fetch-site': 'same-origin', origin: PUBLIC_URL })).statusCode, 201);
    assert.equal((await createKey({ ...cookie(), origin: PUBLIC_URL })).statusCode, 201);
  });

  test('the same cross-site request authenticated by a Bearer API key passes', async () => {
    const headers = { ...asBearer(key), 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' };
    assert.equal((await createKey(headers)).statusCode, 201);
    assert.equal((await createKey(asBearer(key))).statusCode, 201, 'a server-side client sends neither header');
  });

  test('the rule holds whether or not the cookie is valid, and on routes that need no credential', async () => {
    const crossSite = { 'sec-fetch-site': 'cross-site' };
    assertProblem(await createKey({ cookie: 'session=forged-token', ...crossSite }), 403, 'cross_site');
    const login = await ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { ...cookie(), ...crossSite }, payload: { email: user.email, password: user.password } });
    assertProblem(login, 403, 'cross_site');
    assert.equal(login.cookies.length, 0);
  });

  test('the check comes before the body is read: a cross-site text/plain or oversized POST with the cookie is 403', async () => {
    const crossSite = { ...cookie(), 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' };
    assertProblem(await ctx.app.inject({ method: 'POST', url: '/api/keys', headers: crossSite, payload: '{"name":"csrf"}' }), 403, 'cross_site');
    const form = { ...cookie(), origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' };
    assertProblem(await ctx.app.inject({ method: 'POST', url: '/api/keys', headers: form, payload: 'name=csrf' }), 403, 'cross_site');
    const huge = { ...cookie(), 'sec-fetch-site': 'cross-site', 'content-type': 'application/json' };
    assertProblem(await ctx.app.inject({ method: 'POST', url: '/api/keys', headers: huge, payload: `{"name":"${'x'.repeat(ONE_MIB)}"}` }), 403, 'cross_site');
  });
});

describe('hostile bodies are client errors, never 500', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const post = (url: string, body: string) => ctx.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: body });

  test('deeply nested JSON is 400 invalid_request', async () => {
    // Regression: the recursive NUL check overflowed the stack on '['.repeat(5000) and answered 500.
    for (const depth of [5000, 100_000]) {
      for (const body of ['['.repeat(depth) + ']'.repeat(depth), '{"a":'.repeat(depth) + '1' + '}'.repeat(depth), `{"email":${'['.repeat(depth)}${']'.repeat(depth)}}`]) {
        const response = await post('/api/auth/forgot', body);
        assertProblem(response, 400, 'invalid_request');
      }
    }
    const nested = (depth: number) => `{"email":"a@example.com","x":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    assert.match((await post('/api/auth/forgot', nested(100))).json().detail, /nested more than 64 levels/);
    // Nesting within the bound reaches the schema, which names the real mistake.
    assert.match((await post('/api/auth/forgot', nested(10))).json().detail, /additional properties/i);
  });

  test('a body with a "__proto__" or "constructor.prototype" key says so', async () => {
    // Regression: it was answered "The body is not valid JSON", which it is.
    for (const body of ['{"__proto__":{"admin":true},"email":"a@example.com"}', '{"email":"a@example.com","x":[{"__proto__":1}]}', '{"constructor":{"prototype":{"admin":true}}}']) {
      const response = await post('/api/auth/forgot', body);
      assertProblem(response, 400, 'invalid_request');
      assert.match(response.json().detail, /__proto__/);
    }
    // The words alone are fine where a field allows them.
    assert.equal((await post('/api/auth/forgot', '{"email":"__proto__constructor@example.com"}')).statusCode, 200);
    assert.equal((await post('/api/auth/login', '{"email":"a@example.com","password":"{\\"constructor\\":{\\"prototype\\":1}}"}')).statusCode, 401);
    assert.equal((await post('/api/auth/forgot', '{"email":')).json().detail, 'The body is not valid JSON.');
  });
});
