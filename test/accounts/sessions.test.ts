import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { DAY, MINUTE } from '../../src/shared/clock.ts';
import { hashToken } from '../../src/shared/secrets.ts';
import {
  asBearer,
  asSession,
  createApiKey,
  createTestApp,
  PUBLIC_URL,
  registerUser,
  sessionCookieOf,
  settled,
  signIn,
  type TestContext,
  type TestUser,
} from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { assertNoStoredSecretInResponses } from '../support/leaks.ts';
import { assertProblem } from '../support/problem.ts';

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('sessions and password changes', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const me = (headers: Record<string, string>) => ctx.app.inject({ method: 'GET', url: '/api/me', headers });
  const login = (email: string, password: string) =>
    ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: PUBLIC_URL }, payload: { email, password } });
  const changePassword = (headers: Record<string, string>, payload: unknown) =>
    ctx.app.inject({ method: 'POST', url: '/api/me/password', headers, payload: payload as object });
  const listSessions = (headers: Record<string, string>, query = '') =>
    ctx.app.inject({ method: 'GET', url: `/api/me/sessions${query}`, headers });
  const endSession = (headers: Record<string, string>, id: string) =>
    ctx.app.inject({ method: 'DELETE', url: `/api/me/sessions/${id}`, headers });
  const notices = (user: TestUser) => ctx.smtp.to(user.email).filter((mail) => mail.subject === 'Your password was changed');

  async function sessionIdOf(token: string): Promise<string> {
    const response = await listSessions(asSession(token));
    const current = response.json().data.find((session: { current: boolean }) => session.current);
    assert.ok(current, 'the caller appears in its own session list');
    return current.id;
  }

  describe('POST /api/me/password', () => {
    test('changes the password, keeps this session, signs out every other and sends a security notice', async () => {
      const user = await registerUser(ctx);
      const other = await signIn(ctx, user);
      const response = await changePassword(asSession(user.session), { currentPassword: user.password, newPassword: 'a whole new password' });
      assert.equal(response.statusCode, 200);
      assert.deepEqual(response.json(), { ok: true });

      assert.equal((await me(asSession(user.session))).statusCode, 200, 'the current session is kept');
      assertProblem(await me(asSession(other)), 401, 'unauthenticated');
      assertProblem(await login(user.email, user.password), 401, 'invalid_credentials');
      assert.equal((await login(user.email, 'a whole new password')).statusCode, 200);

      await settled(ctx);
      assert.equal(notices(user).length, 1);
      assert.match(notices(user)[0]!.text, /changed/);
    });

    test('a password change retires outstanding reset links', async () => {
      const user = await registerUser(ctx);
      await ctx.app.inject({ method: 'POST', url: '/api/auth/forgot', remoteAddress: '198.51.100.2', payload: { email: user.email } });
      await settled(ctx);
      const mail = ctx.smtp.to(user.email).find((m) => m.subject === 'Reset your password') ?? assert.fail('no reset mail');
      const changed = await changePassword(asSession(user.session), { currentPassword: user.password, newPassword: 'a whole new password' });
      assert.equal(changed.statusCode, 200);
      const reset = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/reset',
        payload: { token: linkIn(mail, '/reset-password').token, password: 'an attacker password' },
      });
      assertProblem(reset, 400, 'invalid_token');
    });

    test('a wrong current password is 401 invalid_credentials and changes nothing', async () => {
      const user = await registerUser(ctx);
      const other = await signIn(ctx, user);
      const response = await changePassword(asSession(user.session), { currentPassword: 'not my password', newPassword: 'a whole new password' });
      assertProblem(response, 401, 'invalid_credentials');
      assert.equal((await me(asSession(user.session))).statusCode, 200);
      assert.equal((await me(asSession(other))).statusCode, 200, 'other sessions stay signed in');
      assert.equal((await login(user.email, user.password)).statusCode, 200);
      assertProblem(await login(user.email, 'a whole new password'), 401, 'invalid_credentials');
      await settled(ctx);
      assert.equal(notices(user).length, 0);
    });

    test('a new password out of 8 to 256 characters, or a malformed body, is 400 invalid_request', async () => {
      const user = await registerUser(ctx);
      const cases: unknown[] = [
        { currentPassword: user.password, newPassword: 'short' },
        { currentPassword: user.password, newPassword: 'x'.repeat(257) },
        { currentPassword: user.password },
        { newPassword: 'a whole new password' },
        { currentPassword: user.password, newPassword: 'a whole new password', email: 'x@example.com' },
      ];
      for (const payload of cases) assertProblem(await changePassword(asSession(user.session), payload), 400, 'invalid_request');
      assert.equal((await login(user.email, user.password)).statusCode, 200);
    });

    test('an API key is 403 forbidden: changing the password takes the signed-in dashboard', async () => {
      const user = await registerUser(ctx);
      const key = await createApiKey(ctx, user);
      assertProblem(await changePassword(asBearer(key), { currentPassword: user.password, newPassword: 'a whole new password' }), 403, 'forbidden');
      assertProblem(await changePassword({}, { currentPassword: user.password, newPassword: 'a whole new password' }), 401, 'unauthenticated');
      assert.equal((await login(user.email, user.password)).statusCode, 200);
    });
  });

  describe('GET /api/me/sessions', () => {
    test('lists id, createdAt, lastSeenAt, userAgent and current; current is only the caller', async () => {
      const user = await registerUser(ctx);
      ctx.clock.advance(MINUTE);
      const other = await signIn(ctx, user, { userAgent: 'Other Browser/1.0' });

      const response = await listSessions(asSession(user.session));
      assert.equal(response.statusCode, 200);
      const { data, nextCursor } = response.json();
      assert.equal(nextCursor, null);
      assert.equal(data.length, 2);
      for (const session of data) {
        assert.deepEqual(Object.keys(session).sort(), ['createdAt', 'current', 'id', 'lastSeenAt', 'userAgent']);
        assert.match(session.id, /^ses_[0-9a-z]{26}$/);
        assert.match(session.createdAt, ISO_MS);
        assert.match(session.lastSeenAt, ISO_MS);
      }
      const [newest, oldest] = data;
      assert.equal(newest.userAgent, 'Other Browser/1.0');
      assert.equal(newest.current, false);
      assert.equal(oldest.current, true);
      assert.equal(new Date(newest.createdAt).getTime() - new Date(oldest.createdAt).getTime(), MINUTE);

      const fromOther = (await listSessions(asSession(other))).json().data;
      assert.deepEqual(fromOther.map((s: { current: boolean }) => s.current), [true, false]);

      const key = await createApiKey(ctx, user);
      const fromKey = (await listSessions(asBearer(key))).json().data;
      assert.equal(fromKey.length, 2);
      assert.ok(fromKey.every((s: { current: boolean }) => !s.current), 'an API key is no session');
    });

    test('lastSeenAt moves when the session is used', async () => {
      const user = await registerUser(ctx);
      const other = await signIn(ctx, user);
      const created = ctx.clock.now();
      ctx.clock.advance(5 * MINUTE);
      assert.equal((await me(asSession(other))).statusCode, 200);
      const data = (await listSessions(asSession(user.session))).json().data;
      const otherView = data.find((s: { current: boolean }) => !s.current);
      assert.equal(otherView.createdAt, new Date(created).toISOString());
      assert.equal(otherView.lastSeenAt, new Date(created + 5 * MINUTE).toISOString());
    });

    test('pages with limit and cursor, newest first, and only the account\'s own sessions', async () => {
      const user = await registerUser(ctx);
      const stranger = await registerUser(ctx);
      for (let i = 0; i < 4; i++) await signIn(ctx, user);
      await signIn(ctx, stranger);

      const all = (await listSessions(asSession(user.session))).json().data.map((s: { id: string }) => s.id);
      assert.equal(all.length, 5);
      assert.deepEqual(all, [...all].sort().reverse());

      const seen: string[] = [];
      let cursor: string | null = null;
      const pageSizes: number[] = [];
      do {
        const query: string = `?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
        const page = await listSessions(asSession(user.session), query);
        assert.equal(page.statusCode, 200);
        const body: { data: Array<{ id: string }>; nextCursor: string | null } = page.json();
        pageSizes.push(body.data.length);
        seen.push(...body.data.map((s) => s.id));
        cursor = body.nextCursor;
      } while (cursor !== null);
      assert.deepEqual(pageSizes, [2, 2, 1]);
      assert.deepEqual(seen, all);
    });

    test('limit 0, 101 or not a number, and a malformed cursor, are 400 invalid_request', async () => {
      const user = await registerUser(ctx);
      for (const query of ['?limit=0', '?limit=101', '?limit=abc', '?limit=-1', '?cursor=not-a-cursor', '?other=1']) {
        assertProblem(await listSessions(asSession(user.session), query), 400, 'invalid_request');
      }
      assert.equal((await listSessions(asSession(user.session), '?limit=100')).statusCode, 200);
      assert.equal((await listSessions(asSession(user.session), '?limit=1')).statusCode, 200);
    });
  });

  describe('DELETE /api/me/sessions/{id}', () => {
    test('204, and that session\'s cookie is 401 at once; the caller stays signed in', async () => {
      const user = await registerUser(ctx);
      const other = await signIn(ctx, user);
      const otherId = await sessionIdOf(other);
      const response = await endSession(asSession(user.session), otherId);
      assert.equal(response.statusCode, 204);
      assert.equal(response.body, '');
      assertProblem(await me(asSession(other)), 401, 'unauthenticated');
      assert.equal((await me(asSession(user.session))).statusCode, 200);
      assert.equal((await listSessions(asSession(user.session))).json().data.length, 1);
      assertProblem(await endSession(asSession(user.session), otherId), 404, 'not_found');
    });

    test('ending the current session signs the caller out', async () => {
      const user = await registerUser(ctx);
      assert.equal((await endSession(asSession(user.session), await sessionIdOf(user.session))).statusCode, 204);
      assertProblem(await me(asSession(user.session)), 401, 'unauthenticated');
    });

    test('another account\'s session id and an unknown id are 404 not_found', async () => {
      const user = await registerUser(ctx);
      const stranger = await registerUser(ctx);
      const strangerSessionId = await sessionIdOf(stranger.session);
      assertProblem(await endSession(asSession(user.session), strangerSessionId), 404, 'not_found');
      assert.equal((await me(asSession(stranger.session))).statusCode, 200, "the stranger's session survives");
      assertProblem(await endSession(asSession(user.session), 'ses_01jz0000000000000000000000'), 404, 'not_found');
      assertProblem(await endSession(asSession(user.session), 'nonsense'), 404, 'not_found');
    });
  });

  describe('30 days idle expiry', () => {
    test('a session idle for 30 days is 401; activity keeps it alive for another 30 days', async () => {
      const user = await registerUser(ctx);
      const idle = user.session;
      const active = await signIn(ctx, user);

      ctx.clock.advance(29 * DAY);
      const touched = await me(asSession(active));
      assert.equal(touched.statusCode, 200);
      const refreshed = touched.cookies.find((c) => c.name === 'session');
      assert.equal(refreshed?.value, active, 'activity renews the cookie');
      assert.equal(refreshed?.maxAge, 30 * DAY / 1000);

      ctx.clock.advance(DAY);
      assertProblem(await me(asSession(idle)), 401, 'unauthenticated');

      ctx.clock.advance(29 * DAY - 1);
      assert.equal((await me(asSession(active))).statusCode, 200, 'idle just under 30 days since day 29');
      ctx.clock.advance(30 * DAY);
      assertProblem(await me(asSession(active)), 401, 'unauthenticated');
    });
  });

  test('the cookie on http is "session": HttpOnly, SameSite=Lax, Path=/, not Secure, for sign-in and reset alike', async () => {
    const user = await registerUser(ctx);
    const signedIn = await login(user.email, user.password);
    await ctx.app.inject({ method: 'POST', url: '/api/auth/forgot', remoteAddress: '198.51.100.1', payload: { email: user.email } });
    await settled(ctx);
    const mail = ctx.smtp.to(user.email).find((m) => m.subject === 'Reset your password') ?? assert.fail('no reset mail');
    const reset = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/reset',
      payload: { token: linkIn(mail, '/reset-password').token, password: 'a whole new password' },
    });
    for (const response of [signedIn, reset]) {
      assert.equal(response.statusCode, 200);
      const cookie = response.cookies.find((c) => c.name === 'session');
      assert.ok(cookie, 'cookie named session');
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.sameSite, 'Lax');
      assert.equal(cookie.path, '/');
      assert.equal(cookie.secure, undefined);
      assert.equal(cookie.domain, undefined);
      assert.match(cookie.value, /^[A-Za-z0-9_-]{43}$/);
    }
  });

  test('session tokens are stored only as their SHA-256', async () => {
    const user = await registerUser(ctx);
    const other = await signIn(ctx, user);
    const rows = await ctx.app.deps.db.selectFrom('sessions').selectAll().where('account_id', '=', user.id).execute();
    assert.equal(rows.length, 2);
    const stored = JSON.stringify(rows);
    for (const token of [user.session, other]) {
      assert.ok(!stored.includes(token), 'a raw session token is stored');
      assert.ok(rows.some((r) => r.token_hash === hashToken(token)));
    }
  });

  test('no response carried a password hash or a stored token hash', () => assertNoStoredSecretInResponses(ctx));
});

describe('the session cookie behind an https PUBLIC_URL', () => {
  const HTTPS_URL = 'https://platform.example.com';
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { PUBLIC_URL: HTTPS_URL } });
  });
  after(() => ctx.close());

  test('is __Host-session, Secure, HttpOnly, SameSite=Lax, Path=/ without Domain', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      headers: { origin: HTTPS_URL },
      payload: { email: 'secure@example.com', password: 'long enough', name: 'S' },
    });
    assert.equal(response.statusCode, 201);
    assert.equal(response.cookies.length, 1);
    const [cookie] = response.cookies;
    assert.equal(cookie!.name, '__Host-session');
    assert.equal(cookie!.secure, true);
    assert.equal(cookie!.httpOnly, true);
    assert.equal(cookie!.sameSite, 'Lax');
    assert.equal(cookie!.path, '/');
    assert.equal(cookie!.domain, undefined);

    const token = sessionCookieOf(response);
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(token, HTTPS_URL) })).statusCode, 200);
    const plainName = await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { cookie: `session=${token}`, origin: HTTPS_URL } });
    assertProblem(plainName, 401, 'unauthenticated', HTTPS_URL);

    await settled(ctx);
    const [mail] = ctx.smtp.to('secure@example.com');
    assert.ok(linkIn(mail!, '/verify-email').url.startsWith(`${HTTPS_URL}/verify-email?token=`));

    const logout = await ctx.app.inject({ method: 'POST', url: '/api/auth/logout', headers: asSession(token, HTTPS_URL) });
    assert.equal(logout.statusCode, 204);
    const cleared = logout.cookies.find((c) => c.name === '__Host-session');
    assert.equal(cleared?.value, '');
    assert.equal(cleared?.secure, true);
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(token, HTTPS_URL) })).statusCode, 401);
  });
});
