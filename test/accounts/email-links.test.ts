import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { DAY, HOUR } from '../../src/shared/clock.ts';
import { hashToken } from '../../src/shared/secrets.ts';
import { asSession, createTestApp, PUBLIC_URL, registerUser, sessionCookieOf, settled, signIn, type TestContext, type TestUser } from '../support/app.ts';
import { linkIn, readOutbox } from '../support/mail.ts';
import { assertNoStoredSecretInResponses } from '../support/leaks.ts';
import { assertProblem } from '../support/problem.ts';

describe('emailed links', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const post = (url: string, payload: unknown, headers: Record<string, string> = { origin: PUBLIC_URL }, remoteAddress?: string) =>
    ctx.app.inject({ method: 'POST', url, payload: payload as object, headers, ...(remoteAddress ? { remoteAddress } : {}) });
  const me = (session: string) => ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(session) });
  const mailsTo = (user: TestUser, subject: string) => ctx.smtp.to(user.email).filter((mail) => mail.subject === subject);
  const forgedToken = () => randomBytes(32).toString('base64url');

  async function verifyTokenOf(user: TestUser): Promise<string> {
    await settled(ctx);
    const mail = mailsTo(user, 'Confirm your email address').at(-1);
    assert.ok(mail, `no confirmation mail to ${user.email}`);
    return linkIn(mail, '/verify-email').token;
  }

  /** Asks for a reset link (each test from its own address) and returns the token of the newest one. */
  async function resetTokenOf(user: TestUser, ip: string): Promise<string> {
    const response = await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, ip);
    assert.equal(response.statusCode, 200);
    await settled(ctx);
    const mail = mailsTo(user, 'Reset your password').at(-1);
    assert.ok(mail, `no reset mail to ${user.email}`);
    return linkIn(mail, '/reset-password').token;
  }

  describe('POST /api/auth/verify', () => {
    test('the emailed link confirms the address; using it again is 400 invalid_token', async () => {
      const user = await registerUser(ctx);
      const token = await verifyTokenOf(user);
      assert.equal((await me(user.session)).json().account.emailVerified, false);

      const response = await post('/api/auth/verify', { token });
      assert.equal(response.statusCode, 200);
      assert.deepEqual(response.json(), { ok: true });
      assert.equal((await me(user.session)).json().account.emailVerified, true);

      assertProblem(await post('/api/auth/verify', { token }), 400, 'invalid_token');
    });

    test('a forged token is 400 invalid_token; a missing or empty one is 400 invalid_request', async () => {
      assertProblem(await post('/api/auth/verify', { token: forgedToken() }), 400, 'invalid_token');
      assertProblem(await post('/api/auth/verify', { token: 'abc' }), 400, 'invalid_token');
      assertProblem(await post('/api/auth/verify', { token: '' }), 400, 'invalid_request');
      assertProblem(await post('/api/auth/verify', {}), 400, 'invalid_request');
      assertProblem(await post('/api/auth/verify', { token: forgedToken(), extra: 1 }), 400, 'invalid_request');
    });

    test('a confirmation link is valid just before 24 hours and 400 invalid_token at 24 hours', async () => {
      const early = await registerUser(ctx);
      const late = await registerUser(ctx);
      const [earlyToken, lateToken] = [await verifyTokenOf(early), await verifyTokenOf(late)];

      ctx.clock.advance(DAY - 1);
      assert.equal((await post('/api/auth/verify', { token: earlyToken })).statusCode, 200);
      ctx.clock.advance(1);
      assertProblem(await post('/api/auth/verify', { token: lateToken }), 400, 'invalid_token');
      assert.equal((await me(late.session)).json().account.emailVerified, false);
    });

    test('two concurrent uses of one token: exactly one succeeds', async () => {
      const user = await registerUser(ctx);
      const token = await verifyTokenOf(user);
      const responses = await Promise.all([post('/api/auth/verify', { token }), post('/api/auth/verify', { token })]);
      assert.deepEqual(responses.map((r) => r.statusCode).sort(), [200, 400]);
      assert.equal((await me(user.session)).json().account.emailVerified, true);
    });
  });

  test('opening an emailed link with GET (a mail scanner) never consumes its token', async () => {
    const user = await registerUser(ctx);
    await settled(ctx);
    const verify = linkIn(mailsTo(user, 'Confirm your email address').at(-1) ?? assert.fail('no mail'), '/verify-email');
    await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, '192.0.2.1');
    await settled(ctx);
    const reset = linkIn(mailsTo(user, 'Reset your password').at(-1) ?? assert.fail('no mail'), '/reset-password');

    for (const link of [verify, reset]) {
      const opened = await ctx.app.inject({ method: 'GET', url: link.url.slice(PUBLIC_URL.length) });
      assert.ok(opened.statusCode < 500);
      const scanned = await ctx.app.inject({ method: 'GET', url: `/api/auth/verify?token=${link.token}` });
      assert.ok(scanned.statusCode < 500);
    }
    assert.equal((await post('/api/auth/verify', { token: verify.token })).statusCode, 200);
    assert.equal((await post('/api/auth/reset', { token: reset.token, password: 'a brand new password' })).statusCode, 200);
  });

  describe('POST /api/me/verify-email', () => {
    test('202 {ok:true} and a new mail whose link works', async () => {
      const user = await registerUser(ctx);
      const first = await verifyTokenOf(user);
      const response = await post('/api/me/verify-email', undefined, asSession(user.session));
      assert.equal(response.statusCode, 202);
      assert.deepEqual(response.json(), { ok: true });
      const second = await verifyTokenOf(user);
      assert.equal(mailsTo(user, 'Confirm your email address').length, 2);
      assert.notEqual(second, first);
      assert.equal((await post('/api/auth/verify', { token: second })).statusCode, 200);
      assert.equal((await me(user.session)).json().account.emailVerified, true);
    });

    test('the 6th request within the hour is 429 with Retry-After, and sends nothing', async () => {
      const user = await registerUser(ctx);
      for (let i = 1; i <= 5; i++) assert.equal((await post('/api/me/verify-email', undefined, asSession(user.session))).statusCode, 202, `request ${i}`);
      const limited = await post('/api/me/verify-email', undefined, asSession(user.session));
      assertProblem(limited, 429, 'rate_limited');
      const retryAfter = Number(limited.headers['retry-after']);
      assert.ok(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 3600, `Retry-After ${limited.headers['retry-after']}`);
      await settled(ctx);
      assert.equal(mailsTo(user, 'Confirm your email address').length, 1 + 5);

      ctx.clock.advance(HOUR);
      assert.equal((await post('/api/me/verify-email', undefined, asSession(user.session))).statusCode, 202);
    });

    test('an already confirmed account gets 202 and no mail', async () => {
      const user = await registerUser(ctx);
      assert.equal((await post('/api/auth/verify', { token: await verifyTokenOf(user) })).statusCode, 200);
      const response = await post('/api/me/verify-email', undefined, asSession(user.session));
      assert.equal(response.statusCode, 202);
      assert.deepEqual(response.json(), { ok: true });
      await settled(ctx);
      assert.equal(mailsTo(user, 'Confirm your email address').length, 1);
    });

    test('requires being signed in', async () => {
      assertProblem(await post('/api/me/verify-email', undefined), 401, 'unauthenticated');
    });
  });

  describe('POST /api/auth/forgot', () => {
    test('known and unknown addresses get the same 200 {ok:true}; only the known one gets a mail', async () => {
      const user = await registerUser(ctx);
      await settled(ctx);
      const before = ctx.smtp.messages.length;
      const known = await post('/api/auth/forgot', { email: ` ${user.email.toUpperCase()}` }, { origin: PUBLIC_URL }, '192.0.2.2');
      const unknown = await post('/api/auth/forgot', { email: 'nobody-at-all@example.com' }, { origin: PUBLIC_URL }, '192.0.2.2');
      for (const response of [known, unknown]) {
        assert.equal(response.statusCode, 200);
        assert.deepEqual(response.json(), { ok: true });
        assert.equal(response.headers['set-cookie'], undefined);
      }
      assert.equal(known.body, unknown.body);
      assert.equal(known.headers['content-type'], unknown.headers['content-type']);
      await settled(ctx);
      assert.equal(ctx.smtp.messages.length, before + 1);
      const [mail] = mailsTo(user, 'Reset your password');
      assert.ok(mail);
      assert.match(linkIn(mail, '/reset-password').url, /^http:\/\/localhost:3000\/reset-password\?token=[A-Za-z0-9_-]{43}$/);
      assert.equal(ctx.smtp.to('nobody-at-all@example.com').length, 0);
    });

    test('beyond 5 mails per address per hour it still answers {ok:true} but sends nothing', async () => {
      const user = await registerUser(ctx);
      const bodies = new Set<string>();
      for (let i = 1; i <= 7; i++) {
        const response = await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, `192.0.2.${10 + i}`);
        assert.equal(response.statusCode, 200, `request ${i}`);
        bodies.add(response.body);
      }
      assert.deepEqual([...bodies], ['{"ok":true}']);
      await settled(ctx);
      assert.equal(mailsTo(user, 'Reset your password').length, 5);

      ctx.clock.advance(HOUR);
      await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, '192.0.2.20');
      await settled(ctx);
      assert.equal(mailsTo(user, 'Reset your password').length, 6);
    });

    test('a malformed body is 400 invalid_request', async () => {
      assertProblem(await post('/api/auth/forgot', {}), 400, 'invalid_request');
      assertProblem(await post('/api/auth/forgot', { email: 42 }), 400, 'invalid_request');
      assertProblem(await post('/api/auth/forgot', { email: '' }), 400, 'invalid_request');
      assertProblem(await post('/api/auth/forgot', { email: 'a@example.com', admin: true }), 400, 'invalid_request');
      const notJson = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/forgot',
        headers: { 'content-type': 'application/json' },
        payload: '{"email":',
      });
      assertProblem(notJson, 400, 'invalid_request');
    });

    test('forgot, register and reset answer while the SMTP server sits on every message', async () => {
      const user = await registerUser(ctx);
      const token = await resetTokenOf(user, '192.0.2.31');
      const before = ctx.smtp.messages.length;
      const release = ctx.smtp.hold();
      try {
        assert.equal((await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, '192.0.2.31')).statusCode, 200);
        assert.equal((await post('/api/auth/register', { email: 'smtp-slow@example.com', password: 'long enough', name: 'S' })).statusCode, 201);
        assert.equal((await post('/api/auth/reset', { token, password: 'a brand new password' })).statusCode, 200);
        assert.equal(ctx.smtp.messages.length, before, 'no mail has been accepted yet');
      } finally {
        release();
      }
      await settled(ctx);
      // The held reset link was retired by the reset, so the count matters here, not the links.
      assert.equal(ctx.smtp.messages.length, before + 3, 'reset link, confirmation and security notice');
    });

    test('forgot and register answer at once while the SMTP server is failing', async () => {
      const user = await registerUser(ctx);
      await settled(ctx);
      const before = ctx.smtp.messages.length;
      ctx.smtp.failing = true;
      try {
        const forgot = await post('/api/auth/forgot', { email: user.email }, { origin: PUBLIC_URL }, '192.0.2.30');
        assert.equal(forgot.statusCode, 200);
        assert.deepEqual(forgot.json(), { ok: true });
        const register = await post('/api/auth/register', { email: 'smtp-down@example.com', password: 'long enough', name: 'D' });
        assert.equal(register.statusCode, 201);
        await settled(ctx);
      } finally {
        ctx.smtp.failing = false;
      }
      assert.equal(ctx.smtp.messages.length, before);
      assert.equal((await me(user.session)).statusCode, 200, 'the service still works');
    });
  });

  describe('POST /api/auth/reset', () => {
    test('sets the password, signs out every other session, signs the caller in and sends a security notice', async () => {
      const user = await registerUser(ctx);
      const second = await signIn(ctx, user);
      const token = await resetTokenOf(user, '192.0.2.40');

      const response = await post('/api/auth/reset', { token, password: 'a brand new password' });
      assert.equal(response.statusCode, 200);
      const { account } = response.json();
      assert.deepEqual(Object.keys(response.json()), ['account']);
      assert.equal(account.id, user.id);
      assert.equal(account.email, user.email);
      const fresh = sessionCookieOf(response);
      assert.ok(![user.session, second].includes(fresh));

      assertProblem(await me(user.session), 401, 'unauthenticated');
      assertProblem(await me(second), 401, 'unauthenticated');
      const signedIn = await me(fresh);
      assert.equal(signedIn.statusCode, 200);
      assert.equal(signedIn.json().account.id, user.id);

      assertProblem(await post('/api/auth/login', { email: user.email, password: user.password }), 401, 'invalid_credentials');
      assert.equal((await post('/api/auth/login', { email: user.email, password: 'a brand new password' })).statusCode, 200);

      await settled(ctx);
      const notices = mailsTo(user, 'Your password was changed');
      assert.equal(notices.length, 1);
      assert.match(notices[0]!.text, /reset/);
    });

    test('a caller that is signed in, with the cookie, ends with a new session only', async () => {
      const user = await registerUser(ctx);
      const token = await resetTokenOf(user, '192.0.2.41');
      const response = await post('/api/auth/reset', { token, password: 'a brand new password' }, asSession(user.session));
      assert.equal(response.statusCode, 200);
      const fresh = sessionCookieOf(response);
      assert.notEqual(fresh, user.session);
      assert.equal((await me(user.session)).statusCode, 401);
      const sessions = await ctx.app.inject({ method: 'GET', url: '/api/me/sessions', headers: asSession(fresh) });
      assert.equal(sessions.json().data.length, 1);
      assert.equal(sessions.json().data[0].current, true);
    });

    test('a reset link works once: reuse is 400 invalid_token', async () => {
      const user = await registerUser(ctx);
      const token = await resetTokenOf(user, '192.0.2.42');
      assert.equal((await post('/api/auth/reset', { token, password: 'first new password' })).statusCode, 200);
      assertProblem(await post('/api/auth/reset', { token, password: 'second new password' }), 400, 'invalid_token');
      assert.equal((await post('/api/auth/login', { email: user.email, password: 'first new password' })).statusCode, 200);
    });

    test('a reset link is valid just before 1 hour and 400 invalid_token at 1 hour', async () => {
      const early = await registerUser(ctx);
      const late = await registerUser(ctx);
      const earlyToken = await resetTokenOf(early, '192.0.2.43');
      const lateToken = await resetTokenOf(late, '192.0.2.43');
      ctx.clock.advance(HOUR - 1);
      assert.equal((await post('/api/auth/reset', { token: earlyToken, password: 'a brand new password' })).statusCode, 200);
      ctx.clock.advance(1);
      assertProblem(await post('/api/auth/reset', { token: lateToken, password: 'a brand new password' }), 400, 'invalid_token');
      assert.equal((await post('/api/auth/login', { email: late.email, password: late.password })).statusCode, 200, 'password unchanged');
    });

    test('a forged token is 400 invalid_token; a short password is 400 invalid_request and spends no token', async () => {
      assertProblem(await post('/api/auth/reset', { token: forgedToken(), password: 'a brand new password' }), 400, 'invalid_token');
      const user = await registerUser(ctx);
      const token = await resetTokenOf(user, '192.0.2.44');
      assertProblem(await post('/api/auth/reset', { token, password: 'short' }), 400, 'invalid_request');
      assertProblem(await post('/api/auth/reset', { token }), 400, 'invalid_request');
      assertProblem(await post('/api/auth/reset', { token, password: 'a brand new password', email: user.email }), 400, 'invalid_request');
      assert.equal((await post('/api/auth/reset', { token, password: 'a brand new password' })).statusCode, 200);
    });

    test('a confirmation token is not a reset token, nor the reverse', async () => {
      const user = await registerUser(ctx);
      const verifyToken = await verifyTokenOf(user);
      const resetToken = await resetTokenOf(user, '192.0.2.45');
      assertProblem(await post('/api/auth/reset', { token: verifyToken, password: 'a brand new password' }), 400, 'invalid_token');
      assertProblem(await post('/api/auth/verify', { token: resetToken }), 400, 'invalid_token');
      assert.equal((await post('/api/auth/login', { email: user.email, password: user.password })).statusCode, 200, 'password unchanged');
      // The refused attempts spent neither token.
      assert.equal((await post('/api/auth/verify', { token: verifyToken })).statusCode, 200);
      assert.equal((await post('/api/auth/reset', { token: resetToken, password: 'a brand new password' })).statusCode, 200);
    });

    test('after a reset, every other outstanding reset link is dead', async () => {
      const user = await registerUser(ctx);
      const older = await resetTokenOf(user, '192.0.2.46');
      const newer = await resetTokenOf(user, '192.0.2.46');
      assert.notEqual(older, newer);
      assert.equal((await post('/api/auth/reset', { token: newer, password: 'a brand new password' })).statusCode, 200);
      assertProblem(await post('/api/auth/reset', { token: older, password: 'an attacker password' }), 400, 'invalid_token');
      assert.equal((await post('/api/auth/login', { email: user.email, password: 'a brand new password' })).statusCode, 200);
    });

    test('two concurrent resets with one token: exactly one succeeds', async () => {
      const user = await registerUser(ctx);
      const token = await resetTokenOf(user, '192.0.2.47');
      const responses: LightMyRequestResponse[] = await Promise.all([
        post('/api/auth/reset', { token, password: 'first new password' }),
        post('/api/auth/reset', { token, password: 'second new password' }),
      ]);
      assert.deepEqual(responses.map((r) => r.statusCode).sort(), [200, 400]);
      const winner = responses.findIndex((r) => r.statusCode === 200) === 0 ? 'first new password' : 'second new password';
      assert.equal((await post('/api/auth/login', { email: user.email, password: winner })).statusCode, 200);
    });
  });

  test('emailed-link tokens are stored only as their SHA-256', async () => {
    const user = await registerUser(ctx);
    const verifyToken = await verifyTokenOf(user);
    const resetToken = await resetTokenOf(user, '192.0.2.48');
    const rows = await ctx.app.deps.db.selectFrom('email_tokens').selectAll().where('account_id', '=', user.id).execute();
    assert.deepEqual(rows.map((r) => r.purpose).sort(), ['reset_password', 'verify_email']);
    const stored = JSON.stringify(rows);
    for (const token of [verifyToken, resetToken]) {
      assert.ok(!stored.includes(token), 'a raw emailed token is stored');
      assert.ok(rows.some((r) => r.token_hash === hashToken(token)));
    }
  });

  test('no response carried a password hash or a stored token hash', () => assertNoStoredSecretInResponses(ctx));
});

describe('mail without SMTP_URL', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { SMTP_URL: '' } });
  });
  after(() => ctx.close());

  test('each mail is an .eml file in MAIL_DIR whose text/plain part carries the full link', async () => {
    assert.equal(ctx.config.smtpUrl, null);
    const user = await registerUser(ctx);
    await settled(ctx);
    const outbox = await readOutbox(ctx.config.mailDir);
    assert.equal(outbox.length, 1);
    const [mail] = outbox;
    assert.ok(mail!.to.includes(user.email));
    assert.equal(mail!.subject, 'Confirm your email address');
    const link = linkIn(mail!, '/verify-email');
    assert.match(link.url, /^http:\/\/localhost:3000\/verify-email\?token=[A-Za-z0-9_-]{43}$/);
    assert.ok(mail!.raw.includes(link.url), 'the link stands whole in the raw message');
    assert.equal(ctx.smtp.messages.length, 0);
    const verify = await ctx.app.inject({ method: 'POST', url: '/api/auth/verify', payload: { token: link.token } });
    assert.equal(verify.statusCode, 200);
  });
});
