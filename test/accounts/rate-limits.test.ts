import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { HOUR, MINUTE } from '../../src/shared/clock.ts';
import { createTestApp, registerUser, settled, type TestContext } from '../support/app.ts';
import { freshDatabase, onPostgres } from '../support/database.ts';
import { assertProblem } from '../support/problem.ts';

function signInWith(ctx: TestContext, email: string, password: string, ip: string, headers: Record<string, string> = {}) {
  return ctx.app.inject({ method: 'POST', url: '/api/auth/login', remoteAddress: ip, headers, payload: { email, password } });
}

function signUpWith(ctx: TestContext, email: string, ip: string, headers: Record<string, string> = {}) {
  return ctx.app.inject({ method: 'POST', url: '/api/auth/register', remoteAddress: ip, headers, payload: { email, password: 'long enough', name: 'R' } });
}

/** A 429 rate_limited problem whose Retry-After is a whole number of seconds, at most `windowSeconds`; returns it. */
function assertRateLimited(response: LightMyRequestResponse, windowSeconds: number): number {
  assertProblem(response, 429, 'rate_limited');
  const header = String(response.headers['retry-after']);
  assert.match(header, /^[1-9]\d*$/, `Retry-After ${header}`);
  const seconds = Number(header);
  assert.ok(seconds <= windowSeconds, `Retry-After ${seconds} is beyond the ${windowSeconds} s window`);
  return seconds;
}

describe('sign-in and sign-up rate limits', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  test('the 11th sign-in attempt for one email within 15 minutes is 429 with Retry-After, from any address', async () => {
    const user = await registerUser(ctx);
    for (let i = 1; i <= 10; i++) {
      assertProblem(await signInWith(ctx, user.email, 'wrong password', `198.51.100.${i}`), 401, 'invalid_credentials');
    }
    const limited = await signInWith(ctx, user.email, user.password, '198.51.100.11');
    const retryAfter = assertRateLimited(limited, 15 * 60);
    assert.equal(limited.cookies.length, 0, 'no session for a limited attempt, even with the right password');

    ctx.clock.advance(retryAfter * 1000 - 1000);
    assertRateLimited(await signInWith(ctx, user.email, user.password, '198.51.100.12'), 15 * 60);
    ctx.clock.advance(1000);
    assert.equal((await signInWith(ctx, user.email, user.password, '198.51.100.13')).statusCode, 200, 'allowed again after Retry-After');
  });

  test('attempts for an unknown email count too', async () => {
    for (let i = 1; i <= 10; i++) {
      assertProblem(await signInWith(ctx, 'ghost@example.com', 'whatever', `198.51.101.${i}`), 401, 'invalid_credentials');
    }
    assertRateLimited(await signInWith(ctx, 'ghost@example.com', 'whatever', '198.51.101.11'), 15 * 60);
  });

  test('different case and spacing of one email count together', async () => {
    const user = await registerUser(ctx);
    const variants = [user.email, user.email.toUpperCase(), ` ${user.email}`, `${user.email}  `, `\t${user.email.toUpperCase()} `];
    for (let i = 0; i < 10; i++) {
      assert.equal((await signInWith(ctx, variants[i % variants.length]!, 'wrong password', `198.51.102.${i}`)).statusCode, 401);
    }
    assertRateLimited(await signInWith(ctx, ` ${user.email.toUpperCase()}`, user.password, '198.51.102.99'), 15 * 60);
  });

  test('the 101st sign-in attempt from one IP, across different emails, is 429; another IP is not affected; after the window it is allowed', async () => {
    const ip = '203.0.113.50';
    for (let i = 1; i <= 100; i++) {
      assert.equal((await signInWith(ctx, `spray${i}@example.com`, 'password1', ip)).statusCode, 401, `attempt ${i}`);
    }
    assertRateLimited(await signInWith(ctx, 'spray101@example.com', 'password1', ip), 15 * 60);
    const user = await registerUser(ctx);
    assertRateLimited(await signInWith(ctx, user.email, user.password, ip), 15 * 60);
    assert.equal((await signInWith(ctx, user.email, user.password, '203.0.113.51')).statusCode, 200);

    ctx.clock.advance(15 * MINUTE);
    assert.equal((await signInWith(ctx, user.email, user.password, ip)).statusCode, 200);
  });

  test('sign-up: the 6th attempt for one email within the hour is 429, whatever the outcome of the first five', async () => {
    const email = 'signup-limit@example.com';
    assert.equal((await signUpWith(ctx, email, '198.51.103.1')).statusCode, 201);
    for (let i = 2; i <= 5; i++) assertProblem(await signUpWith(ctx, ` ${email.toUpperCase()}`, `198.51.103.${i}`), 409, 'email_taken');
    assertRateLimited(await signUpWith(ctx, email, '198.51.103.6'), 3600);
    ctx.clock.advance(HOUR);
    assertProblem(await signUpWith(ctx, email, '198.51.103.7'), 409, 'email_taken');
  });

  test('sign-up: the 21st attempt from one IP within the hour is 429; another IP is not affected', async () => {
    const ip = '203.0.113.60';
    for (let i = 1; i <= 20; i++) assert.equal((await signUpWith(ctx, `per-ip-${i}@example.com`, ip)).statusCode, 201, `sign-up ${i}`);
    assertRateLimited(await signUpWith(ctx, 'per-ip-21@example.com', ip), 3600);
    assert.equal((await signUpWith(ctx, 'per-ip-21@example.com', '203.0.113.61')).statusCode, 201);
    ctx.clock.advance(HOUR);
    assert.equal((await signUpWith(ctx, 'per-ip-22@example.com', ip)).statusCode, 201);
  });

  test('forgot mails at most 20 reset links per IP per hour, still answering {ok:true}', async () => {
    const users = [];
    for (let i = 0; i < 21; i++) users.push(await registerUser(ctx));
    await settled(ctx);
    const before = ctx.smtp.messages.length;
    for (const user of users) {
      const response = await ctx.app.inject({ method: 'POST', url: '/api/auth/forgot', remoteAddress: '203.0.113.70', payload: { email: user.email } });
      assert.deepEqual(response.json(), { ok: true });
    }
    await settled(ctx);
    assert.equal(ctx.smtp.messages.length, before + 20);
    const mailed = users.filter((user) => ctx.smtp.to(user.email).some((m) => m.subject === 'Reset your password'));
    assert.equal(mailed.length, 20, 'one of the 21 addresses got nothing');
  });
});

describe('rate limits shared by two app instances on one database', () => {
  let first: TestContext;
  let second: TestContext;
  let sqliteDir: string | undefined;
  let dropDatabase: () => Promise<void>;
  before(async () => {
    // In-memory SQLite is private to a connection: two processes share a file.
    sqliteDir = onPostgres ? undefined : await mkdtemp(join(tmpdir(), 'shared-db-'));
    const database = await freshDatabase(sqliteDir ? join(sqliteDir, 'service.db') : undefined);
    dropDatabase = () => database.drop();
    first = await createTestApp({ database });
    second = await createTestApp({ database });
  });
  after(async () => {
    await first.close();
    await second.close();
    await dropDatabase();
    if (sqliteDir) await rm(sqliteDir, { recursive: true, force: true });
  });

  test('attempts made through either instance count against one limit', async () => {
    const user = await registerUser(first);
    for (let i = 1; i <= 10; i++) {
      const app = i % 2 === 0 ? first : second;
      assert.equal((await signInWith(app, user.email, 'wrong password', `198.51.104.${i}`)).statusCode, 401);
    }
    assertRateLimited(await signInWith(first, user.email, user.password, '198.51.104.11'), 15 * 60);
    assertRateLimited(await signInWith(second, user.email, user.password, '198.51.104.12'), 15 * 60);
  });
});

describe('RATE_LIMIT=off', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { RATE_LIMIT: 'off' } });
  });
  after(() => ctx.close());

  test('disables the sign-in and sign-up limits', async () => {
    const user = await registerUser(ctx);
    for (let i = 1; i <= 12; i++) assert.equal((await signInWith(ctx, user.email, 'wrong password', '198.51.105.1')).statusCode, 401);
    assert.equal((await signInWith(ctx, user.email, user.password, '198.51.105.1')).statusCode, 200);
    for (let i = 1; i <= 7; i++) assert.equal((await signUpWith(ctx, user.email, '198.51.105.1')).statusCode, 409);
    for (let i = 1; i <= 21; i++) assert.equal((await signUpWith(ctx, `off-${i}@example.com`, '198.51.105.2')).statusCode, 201);
  });
});

describe('the client address and TRUST_PROXY', () => {
  let trusting: TestContext;
  let direct: TestContext;
  before(async () => {
    trusting = await createTestApp({ env: { TRUST_PROXY: 'on' } });
    direct = await createTestApp();
  });
  after(async () => {
    await trusting.close();
    await direct.close();
  });

  const PROXY = '10.9.9.9';

  test('with TRUST_PROXY on, X-Forwarded-For decides the IP that is limited', async () => {
    const client = { 'x-forwarded-for': '203.0.113.7' };
    for (let i = 1; i <= 20; i++) assert.equal((await signUpWith(trusting, `proxied-${i}@example.com`, PROXY, client)).statusCode, 201);
    assertRateLimited(await signUpWith(trusting, 'proxied-21@example.com', PROXY, client), 3600);
    assert.equal((await signUpWith(trusting, 'proxied-21@example.com', PROXY, { 'x-forwarded-for': '203.0.113.8' })).statusCode, 201, 'another client behind the same proxy');
  });

  test('with TRUST_PROXY on, a client cannot dodge the per-IP limit by sending its own X-Forwarded-For entries', async () => {
    // Regression: with every hop trusted, the left-most entry (written by the client) was taken as its address.
    for (let i = 1; i <= 20; i++) {
      const spoofed = { 'x-forwarded-for': `192.0.2.${i}, 203.0.113.9` };
      assert.equal((await signUpWith(trusting, `spoof-${i}@example.com`, PROXY, spoofed)).statusCode, 201);
    }
    assertRateLimited(await signUpWith(trusting, 'spoof-21@example.com', PROXY, { 'x-forwarded-for': '192.0.2.99, 203.0.113.9' }), 3600);
  });

  test('without TRUST_PROXY, X-Forwarded-For is ignored', async () => {
    for (let i = 1; i <= 20; i++) {
      assert.equal((await signUpWith(direct, `direct-${i}@example.com`, '203.0.113.20', { 'x-forwarded-for': `192.0.2.${i}` })).statusCode, 201);
    }
    assertRateLimited(await signUpWith(direct, 'direct-21@example.com', '203.0.113.20', { 'x-forwarded-for': '192.0.2.200' }), 3600);
  });
});
