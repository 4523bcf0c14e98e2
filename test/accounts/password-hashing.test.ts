import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MAX_QUEUED_HASHES, passwordHashingLoad } from '../../src/accounts/passwords.ts';
import { HOUR, MINUTE } from '../../src/shared/clock.ts';
import { createTestApp, PUBLIC_URL, registerUser, settled, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { assertProblem } from '../support/problem.ts';

const forgedToken = () => randomBytes(32).toString('base64url');
const hashesStarted = () => passwordHashingLoad().started;

describe('emailed-link endpoints: cheap refusals and per-IP limits', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const post = (url: string, payload: unknown, ip: string) =>
    ctx.app.inject({ method: 'POST', url, headers: { origin: PUBLIC_URL }, remoteAddress: ip, payload: payload as object });

  async function resetToken(email: string): Promise<string> {
    await post('/api/auth/forgot', { email }, '192.0.2.200');
    await settled(ctx);
    return linkIn(ctx.smtp.to(email).filter((mail) => mail.subject === 'Reset your password').at(-1)!, '/reset-password').token;
  }

  test('a reset with an unknown, used or expired token is 400 without hashing the password', async () => {
    // Regression: argon2 ran before the token was looked at, so every forged token cost a full hash.
    const user = await registerUser(ctx);
    let started = hashesStarted();
    assertProblem(await post('/api/auth/reset', { token: forgedToken(), password: 'a new password' }, '192.0.2.1'), 400, 'invalid_token');
    assert.equal(hashesStarted(), started, 'no hash for a forged token');

    const token = await resetToken(user.email);
    started = hashesStarted();
    assert.equal((await post('/api/auth/reset', { token, password: 'a new password' }, '192.0.2.1')).statusCode, 200);
    assert.equal(hashesStarted(), started + 1, 'one hash for a good token');
    started = hashesStarted();
    assertProblem(await post('/api/auth/reset', { token, password: 'another password' }, '192.0.2.1'), 400, 'invalid_token');
    assert.equal(hashesStarted(), started, 'no hash for a used token');

    const expiring = await resetToken(user.email);
    ctx.clock.advance(HOUR);
    started = hashesStarted();
    assertProblem(await post('/api/auth/reset', { token: expiring, password: 'another password' }, '192.0.2.1'), 400, 'invalid_token');
    assert.equal(hashesStarted(), started, 'no hash for an expired token');
  });

  test('reset: the 21st attempt from one IP within 15 minutes is 429 with Retry-After', async () => {
    for (let i = 1; i <= 20; i++) assertProblem(await post('/api/auth/reset', { token: forgedToken(), password: 'a new password' }, '192.0.2.2'), 400, 'invalid_token');
    const limited = await post('/api/auth/reset', { token: forgedToken(), password: 'a new password' }, '192.0.2.2');
    assertProblem(limited, 429, 'rate_limited');
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(retryAfter > 0 && retryAfter <= 15 * 60, `Retry-After ${retryAfter}`);
    assertProblem(await post('/api/auth/reset', { token: forgedToken(), password: 'a new password' }, '192.0.2.3'), 400, 'invalid_token');
    ctx.clock.advance(15 * MINUTE);
    assertProblem(await post('/api/auth/reset', { token: forgedToken(), password: 'a new password' }, '192.0.2.2'), 400, 'invalid_token');
  });

  test('verify: the 61st attempt from one IP within 15 minutes is 429 with Retry-After', async () => {
    for (let i = 1; i <= 60; i++) assertProblem(await post('/api/auth/verify', { token: forgedToken() }, '192.0.2.4'), 400, 'invalid_token');
    const limited = await post('/api/auth/verify', { token: forgedToken() }, '192.0.2.4');
    assertProblem(limited, 429, 'rate_limited');
    assert.match(String(limited.headers['retry-after']), /^[1-9]\d*$/);
    assertProblem(await post('/api/auth/verify', { token: forgedToken() }, '192.0.2.5'), 400, 'invalid_token');
  });
});

describe('the password-hashing queue', () => {
  test('the dummy hash for unknown emails exists before the first sign-in, which then costs one hash', async () => {
    // Regression: the dummy hash was computed at the first unknown-email sign-in, which then cost two hashes.
    const cost = { memoryKiB: 72, passes: 1, parallelism: 1 };
    const beforeBuild = hashesStarted();
    const ctx = await createTestApp({ passwordHashCost: cost });
    try {
      assert.ok(hashesStarted() > beforeBuild, 'started while the app was built');
      const started = hashesStarted();
      const response = await ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: PUBLIC_URL }, payload: { email: 'nobody@example.com', password: 'whatever it is' } });
      assertProblem(response, 401, 'invalid_credentials');
      assert.equal(hashesStarted() - started, 1);
    } finally {
      await ctx.close();
    }
  });

  test('beyond the queue, sign-in is 503 service_unavailable with Retry-After, and nothing fails otherwise', async () => {
    // Regression: the queue was unbounded, so a flood of sign-ins held every request (and its memory) for as long as it lasted.
    const ctx = await createTestApp({ env: { RATE_LIMIT: 'off' }, passwordHashCost: { memoryKiB: 8192, passes: 2, parallelism: 1 } });
    try {
      const burst = MAX_QUEUED_HASHES + 30;
      const responses = await Promise.all(
        Array.from({ length: burst }, (_, i) =>
          ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: PUBLIC_URL }, payload: { email: `flood${i}@example.com`, password: 'wrong password' } }),
        ),
      );
      const statuses = responses.map((response) => response.statusCode);
      assert.ok(statuses.every((status) => status === 401 || status === 503), `only 401 and 503: ${statuses.join(',')}`);
      const refused = responses.filter((response) => response.statusCode === 503);
      assert.ok(refused.length > 0, 'some were refused');
      assert.ok(statuses.filter((status) => status === 401).length >= MAX_QUEUED_HASHES, 'the queue itself was served');
      for (const response of refused) {
        assertProblem(response, 503, 'service_unavailable');
        assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
      }
      assert.deepEqual(passwordHashingLoad().queued, 0);
    } finally {
      await ctx.close();
    }
  });
});
