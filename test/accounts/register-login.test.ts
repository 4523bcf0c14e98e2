import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asBearer, asSession, createApiKey, createTestApp, PUBLIC_URL, registerUser, sessionCookieOf, settled, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';

describe('sign-up and sign-in', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const post = (url: string, payload: unknown, headers: Record<string, string> = { origin: PUBLIC_URL }) =>
    ctx.app.inject({ method: 'POST', url, payload: payload as object, headers });

  test('register creates the account, signs in with an HttpOnly Lax cookie and mails a confirmation link', async () => {
    const response = await post('/api/auth/register', { email: '  Alice@Example.COM ', password: 'correct horse', name: 'Alice' });
    assert.equal(response.statusCode, 201);
    const { account } = response.json();
    assert.match(account.id, /^acct_[0-9a-z]{26}$/);
    assert.deepEqual(Object.keys(account).sort(), ['createdAt', 'email', 'emailVerified', 'id', 'name']);
    assert.equal(account.email, 'alice@example.com');
    assert.equal(account.emailVerified, false);
    assert.match(account.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const cookie = response.cookies.find((c) => c.name === 'session');
    assert.ok(cookie);
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(cookie.path, '/');
    assert.equal(cookie.secure, undefined);

    const me = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(cookie.value) });
    assert.equal(me.statusCode, 200);
    // CONTRACT 17: /api/me tells of the second factors too; an account without one has none.
    assert.deepEqual(me.json(), { account, secondFactor: { totp: false, passkeys: 0, recoveryCodesLeft: 0 } });

    await settled(ctx);
    const [mail] = ctx.smtp.to('alice@example.com');
    assert.ok(mail, 'a confirmation mail was sent');
    assert.equal(mail.subject, 'Confirm your email address');
    assert.match(linkIn(mail, '/verify-email').url, /^http:\/\/localhost:3000\/verify-email\?token=[A-Za-z0-9_-]{43}$/);
  });

  test('a used email is 409 email_taken, whatever its case and spacing', async () => {
    await registerUser(ctx, { email: 'taken@example.com' });
    const response = await post('/api/auth/register', { email: ' TAKEN@example.com', password: 'another password', name: 'B' });
    assert.equal(response.statusCode, 409);
    assert.equal(response.json().code, 'email_taken');
    assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
  });

  test('register rejects bad input with 400 and creates nothing', async () => {
    const cases: Array<[string, unknown]> = [
      ['short password', { email: 'p1@example.com', password: 'short', name: 'P' }],
      ['long password', { email: 'p2@example.com', password: 'x'.repeat(257), name: 'P' }],
      ['not an email', { email: 'not-an-email', password: 'long enough', name: 'P' }],
      ['blank name', { email: 'p3@example.com', password: 'long enough', name: '   ' }],
      ['missing name', { email: 'p4@example.com', password: 'long enough' }],
      ['unknown field', { email: 'p5@example.com', password: 'long enough', name: 'P', admin: true }],
      ['wrong type', { email: 'p6@example.com', password: 12345678, name: 'P' }],
    ];
    for (const [label, payload] of cases) {
      const response = await post('/api/auth/register', payload);
      assert.equal(response.statusCode, 400, label);
      assert.equal(response.json().code, 'invalid_request', label);
    }
    for (const n of [1, 2, 3, 4, 5, 6]) {
      const login = await post('/api/auth/login', { email: `p${n}@example.com`, password: 'long enough' });
      assert.equal(login.statusCode, 401, `p${n} was not created`);
    }
  });

  test('passwords of exactly 8 and 256 characters are accepted', async () => {
    for (const [email, password] of [['min@example.com', '12345678'], ['max@example.com', 'y'.repeat(256)]] as const) {
      assert.equal((await post('/api/auth/register', { email, password, name: 'Edge' })).statusCode, 201);
      assert.equal((await post('/api/auth/login', { email, password })).statusCode, 200);
    }
  });

  test('wrong password and unknown email give the same 401 body', async () => {
    const user = await registerUser(ctx);
    const wrongPassword = await post('/api/auth/login', { email: user.email, password: 'not the password' });
    const unknownEmail = await post('/api/auth/login', { email: 'nobody-here@example.com', password: 'not the password' });
    assert.equal(wrongPassword.statusCode, 401);
    assert.equal(unknownEmail.statusCode, 401);
    assert.equal(wrongPassword.body, unknownEmail.body);
    assert.equal(wrongPassword.json().code, 'invalid_credentials');
    assert.equal(wrongPassword.cookies.length, 0);
  });

  test('login normalises the email and issues a new session token every time', async () => {
    const user = await registerUser(ctx);
    const first = await post('/api/auth/login', { email: `  ${user.email.toUpperCase()} `, password: user.password });
    const second = await post('/api/auth/login', { email: user.email, password: user.password });
    assert.equal(first.statusCode, 200);
    assert.equal(first.json().account.email, user.email);
    const tokens = new Set([user.session, sessionCookieOf(first), sessionCookieOf(second)]);
    assert.equal(tokens.size, 3);
    for (const token of tokens) {
      assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(token) })).statusCode, 200);
    }
  });

  test('logout deletes the session server-side: the old cookie no longer works', async () => {
    const user = await registerUser(ctx);
    const logout = await post('/api/auth/logout', undefined, asSession(user.session));
    assert.equal(logout.statusCode, 204);
    assert.equal(logout.body, '');
    const cleared = logout.cookies.find((c) => c.name === 'session');
    assert.equal(cleared?.value, '');
    const me = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(user.session) });
    assert.equal(me.statusCode, 401);
    assert.equal(me.json().code, 'unauthenticated');
  });

  test('GET /api/me without a credential is 401 with WWW-Authenticate: Bearer', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/api/me' });
    assert.equal(response.statusCode, 401);
    assert.match(String(response.headers['www-authenticate']), /^Bearer/);
    const forged = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession('forged-session-token') });
    assert.equal(forged.statusCode, 401);
  });

  test('an API key acts as its owner', async () => {
    const user = await registerUser(ctx);
    const key = await createApiKey(ctx, user);
    const me = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asBearer(key) });
    assert.equal(me.statusCode, 200);
    assert.equal(me.json().account.id, user.id);
  });

  test('no response ever carries a password hash or a stored token hash', async () => {
    const rows = [
      ...(await ctx.app.deps.db.selectFrom('accounts').select('password_hash as secret').execute()),
      ...(await ctx.app.deps.db.selectFrom('sessions').select('token_hash as secret').execute()),
      ...(await ctx.app.deps.db.selectFrom('email_tokens').select('token_hash as secret').execute()),
      ...(await ctx.app.deps.db.selectFrom('api_keys').select('token_hash as secret').execute()),
    ];
    assert.ok(rows.length > 10);
    assert.ok(ctx.responses.length > 20);
    for (const body of ctx.responses) {
      assert.doesNotMatch(body, /argon2/);
      for (const { secret } of rows) assert.ok(!body.includes(secret), 'a stored hash appeared in a response');
    }
  });
});
