import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { asSession, createTestApp, PUBLIC_URL, sessionCookieOf, settled, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { connectApplication, registerClient } from '../support/oauth.ts';
import { assertProblem } from '../support/problem.ts';
import { totpCode } from '../support/totp.ts';
import { softwareAuthenticator } from '../support/webauthn.ts';
import { SECURITY_EVENT_TYPES } from '../../src/security-log/security-log.ts';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const BROWSER = 'Mozilla/5.0 (security-log test)';
const IP = '203.0.113.7';

/** CONTRACT 17: GET /api/me/security-log. */
describe('security log', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, options: { session?: string; payload?: object; cookies?: Record<string, string> } = {}) => {
    const cookies = { ...(options.session ? { session: options.session } : {}), ...options.cookies };
    const cookie = Object.entries(cookies).map(([name, value]) => `${name}=${value}`).join('; ');
    return ctx.app.inject({
      method,
      url,
      remoteAddress: IP,
      headers: { 'user-agent': BROWSER, origin: PUBLIC_URL, ...(cookie ? { cookie } : {}) },
      ...(options.payload ? { payload: options.payload } : {}),
    });
  };
  const ok = (response: LightMyRequestResponse, status = 200) => {
    assert.equal(response.statusCode, status, response.body);
    return response;
  };
  const mailTo = async (email: string, subject: string) => {
    await settled(ctx);
    const mail = ctx.smtp.to(email).filter((item) => item.subject === subject).at(-1);
    assert.ok(mail, `a mail "${subject}"`);
    return mail;
  };

  test('every kind of event is listed, newest first, with time, IP and user agent, and never a secret, code or token', async () => {
    const email = `log-${Date.now()}@example.com`;
    const password = 'correct horse battery';
    const secrets: string[] = [];
    const keep = (response: LightMyRequestResponse) => {
      for (const cookie of response.cookies) if (cookie.value !== '') secrets.push(cookie.value);
      return response;
    };

    const registered = keep(ok(await call('POST', '/api/auth/register', { payload: { email, password, name: 'Log' } }), 201));
    let session = sessionCookieOf(registered);
    const verifyToken = linkIn(await mailTo(email, 'Confirm your email address'), '/verify-email').token;
    secrets.push(verifyToken);
    ok(await call('POST', '/api/auth/verify', { payload: { token: verifyToken } }));
    assertProblem(await call('POST', '/api/auth/login', { payload: { email, password: 'not the password' } }), 401, 'invalid_credentials');
    const other = keep(ok(await call('POST', '/api/auth/login', { payload: { email, password } })));
    const otherId = (await call('GET', '/api/me/sessions', { session })).json().data.find((item: { current: boolean }) => !item.current).id;
    ok(await call('DELETE', `/api/me/sessions/${otherId}`, { session }), 204);
    assert.ok(sessionCookieOf(other));

    const key = ok(await call('POST', '/api/keys', { session, payload: { name: 'deploy' } }), 201).json();
    secrets.push(key.key);
    ok(await call('DELETE', `/api/keys/${key.id}`, { session }), 204);

    const endpoint = ok(await call('POST', '/api/event-webhooks', { session, payload: { url: 'https://hooks.example.com/in' } }), 201).json();
    secrets.push(endpoint.secret);
    secrets.push(ok(await call('POST', `/api/event-webhooks/${endpoint.id}/rotate-secret`, { session })).json().secret);

    const user = { id: registered.json().account.id, email, password, session };
    const tokens = await connectApplication(ctx, user, await registerClient(ctx));
    secrets.push(tokens.access_token, tokens.refresh_token);
    const application = (await call('GET', '/api/me/applications', { session })).json().data[0];
    ok(await call('DELETE', `/api/me/applications/${application.id}`, { session }), 204);

    const authenticator = softwareAuthenticator();
    const passkeyOptions = ok(await call('POST', '/api/me/passkeys/options', { session })).json();
    const passkey = ok(await call('POST', '/api/me/passkeys', { session, payload: { name: 'Laptop', response: authenticator.register(passkeyOptions, PUBLIC_URL) } }), 201).json();
    ok(await call('DELETE', `/api/me/passkeys/${passkey.id}`, { session }), 204);

    const { secret } = ok(await call('POST', '/api/me/totp', { session })).json();
    secrets.push(secret);
    const firstCode = totpCode(secret, ctx.clock.now());
    const { recoveryCodes } = ok(await call('POST', '/api/me/totp/confirm', { session, payload: { code: firstCode } })).json();
    secrets.push(firstCode, ...recoveryCodes);
    const { recoveryCodes: renewed } = ok(await call('POST', '/api/me/recovery-codes', { session })).json();
    secrets.push(...renewed);

    ok(await call('POST', '/api/auth/logout', { session }), 204);
    const pending = keep(ok(await call('POST', '/api/auth/login', { payload: { email, password } })));
    const pendingCookie = pending.cookies.find((cookie) => cookie.name === 'sign-in')!.value;
    assertProblem(await call('POST', '/api/auth/login/second-factor', { payload: { code: 'wrong-code1' }, cookies: { 'sign-in': pendingCookie } }), 401, 'invalid_code');
    const signedIn = keep(ok(await call('POST', '/api/auth/login/second-factor', { payload: { code: renewed[0] }, cookies: { 'sign-in': pendingCookie } })));
    session = sessionCookieOf(signedIn);

    ctx.clock.advance(30_000);
    const disableCode = totpCode(secret, ctx.clock.now());
    secrets.push(disableCode);
    ok(await call('DELETE', '/api/me/totp', { session, payload: { code: disableCode } }), 204);
    ok(await call('POST', '/api/me/password', { session, payload: { currentPassword: password, newPassword: 'another long password' } }));
    ok(await call('POST', '/api/auth/forgot', { payload: { email } }));
    const resetToken = linkIn(await mailTo(email, 'Reset your password'), '/reset-password').token;
    secrets.push(resetToken);
    session = sessionCookieOf(keep(ok(await call('POST', '/api/auth/reset', { payload: { token: resetToken, password: 'a third long password' } }))));

    const page = ok(await call('GET', '/api/me/security-log?limit=100', { session }));
    const { data, nextCursor } = page.json();
    assert.equal(nextCursor, null);
    const types: string[] = data.map((entry: { type: string }) => entry.type);
    for (const type of SECURITY_EVENT_TYPES) assert.ok(types.includes(type), `the log has a ${type} entry: ${types.join(', ')}`);
    assert.deepEqual([...data].sort((a, b) => (a.id < b.id ? 1 : -1)), data, 'newest first');
    assert.equal(types[0], 'sign_in');
    assert.equal(types[1], 'password_reset');
    for (const entry of data) {
      assert.deepEqual(Object.keys(entry).sort(), ['at', 'detail', 'id', 'ip', 'type', 'userAgent']);
      assert.match(entry.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      if (entry.type === 'oauth_grant_created') continue; // given on the consent page by the helper, which sends neither
      assert.equal(entry.ip, IP, `${entry.type} has the IP`);
      assert.equal(entry.userAgent, BROWSER, `${entry.type} has the user agent`);
    }
    const byType = (type: string) => data.find((entry: { type: string }) => entry.type === type);
    assert.deepEqual(byType('api_key_created').detail, { apiKeyId: key.id, name: 'deploy' });
    assert.deepEqual(byType('passkey_added').detail, { passkeyId: passkey.id, name: 'Laptop' });
    assert.deepEqual(byType('sign_in_failed').detail, { step: 'second_factor' });
    assert.equal(byType('webhook_secret_rotated').detail.endpointId, endpoint.id);

    // Never a secret, code or token, in the log or in any answer about it.
    for (const value of secrets) {
      assert.ok(value.length >= 6);
      assert.ok(!page.body.includes(value), `the log holds no ${value.slice(0, 4)}…`);
    }
    const rows = await ctx.app.deps.db.selectFrom('security_log').selectAll().execute();
    const raw = JSON.stringify(rows);
    for (const value of secrets) assert.ok(!raw.includes(value), 'nor does its table');

    // Paginated like the other lists.
    const first = ok(await call('GET', '/api/me/security-log?limit=2', { session })).json();
    assert.equal(first.data.length, 2);
    const second = ok(await call('GET', `/api/me/security-log?limit=2&cursor=${first.nextCursor}`, { session })).json();
    assert.deepEqual(second.data.map((entry: { id: string }) => entry.id), data.slice(2, 4).map((entry: { id: string }) => entry.id));
    assertProblem(await call('GET', '/api/me/security-log?limit=101', { session }), 400, 'invalid_request');
    assertProblem(await ctx.app.inject({ method: 'GET', url: '/api/me/security-log' }), 401, 'unauthenticated');
    // Another account sees only its own.
    const stranger = ok(await call('POST', '/api/auth/register', { payload: { email: `other-${email}`, password, name: 'Other' } }), 201);
    const theirs = ok(await call('GET', '/api/me/security-log', { session: sessionCookieOf(stranger) })).json().data;
    assert.deepEqual(theirs.map((entry: { type: string }) => entry.type), ['sign_in']);
  });

  test('entries are kept 400 days, whatever RETENTION is', async () => {
    const short = await createTestApp({ env: { RETENTION: '1d' } });
    try {
      const email = `kept-${Date.now()}@example.com`;
      const registered = await short.app.inject({ method: 'POST', url: '/api/auth/register', headers: { origin: PUBLIC_URL }, payload: { email, password: 'correct horse battery', name: 'Kept' } });
      assert.equal(registered.statusCode, 201);
      const runRetention = async () => {
        for (let i = 0; i < 3; i++) {
          short.clock.advance(MINUTE);
          await short.app.jobs.drain();
        }
      };
      short.clock.advance(200 * DAY);
      const later = await short.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: PUBLIC_URL }, payload: { email, password: 'correct horse battery' } });
      const laterSession = sessionCookieOf(later);
      await runRetention();
      // The registration's session has gone idle and was cleaned up; its log entry stays (200 days < 400).
      const listed = await short.app.inject({ method: 'GET', url: '/api/me/security-log', headers: asSession(laterSession) });
      assert.deepEqual(listed.json().data.map((entry: { type: string }) => entry.type), ['sign_in', 'sign_in']);
      short.clock.advance(201 * DAY);
      await runRetention();
      // 401 days after the first sign-in, 201 after the second: only the second is left (its session has idled out too, so read the table).
      const rows = await short.app.deps.db.selectFrom('security_log').select('type').execute();
      assert.deepEqual(rows.map((row) => row.type), ['sign_in']);
    } finally {
      await short.close();
    }
  });
});
