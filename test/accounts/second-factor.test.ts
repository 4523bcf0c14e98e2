import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { asBearer, asSession, createTestApp, PUBLIC_URL, registerUser, sessionCookieOf, settled, type TestContext, type TestUser } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { assertProblem } from '../support/problem.ts';
import { totpCode } from '../support/totp.ts';
import { softwareAuthenticator } from '../support/webauthn.ts';

const MINUTE = 60_000;
const STEP = 30_000;
const BROWSER = 'Mozilla/5.0 (second-factor test)';

/** CONTRACT 17: TOTP, recovery codes, passkeys, the second step of sign-in, recent authentication. */
describe('second factor', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  let ipCounter = 0;
  /** Each test signs in from an address of its own: the per-IP sign-in limit is not what these tests are about. */
  const newIp = () => `198.51.100.${++ipCounter}`;

  interface Call {
    session?: string;
    cookies?: Record<string, string>;
    payload?: object;
    ip?: string;
    bearer?: string;
  }
  const call = (method: 'GET' | 'POST' | 'DELETE' | 'PATCH', url: string, options: Call = {}) => {
    const cookies = { ...(options.session ? { session: options.session } : {}), ...options.cookies };
    const cookie = Object.entries(cookies).map(([name, value]) => `${name}=${value}`).join('; ');
    return ctx.app.inject({
      method,
      url,
      headers: {
        'user-agent': BROWSER,
        ...(options.bearer ? asBearer(options.bearer) : { origin: PUBLIC_URL }),
        ...(cookie ? { cookie } : {}),
      },
      ...(options.payload ? { payload: options.payload } : {}),
      ...(options.ip ? { remoteAddress: options.ip } : {}),
    });
  };
  const cookieOf = (response: LightMyRequestResponse, name: string) => response.cookies.find((cookie) => cookie.name === name && cookie.value !== '');
  const me = async (session: string) => (await call('GET', '/api/me', { session })).json();

  const login = (user: TestUser, ip: string) => call('POST', '/api/auth/login', { payload: { email: user.email, password: user.password }, ip });

  /** Password step of a sign-in that needs a second one: the pending cookie's value. */
  async function startSignIn(user: TestUser, ip: string): Promise<string> {
    const response = await login(user, ip);
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(response.cookies.find((cookie) => cookie.name === 'session'), undefined, 'no session before the second step');
    const pending = cookieOf(response, 'sign-in');
    assert.ok(pending, 'a pending sign-in cookie');
    return pending.value;
  }

  const secondStep = (pending: string | undefined, payload: object, ip: string) =>
    call('POST', '/api/auth/login/second-factor', { payload, ip, ...(pending ? { cookies: { 'sign-in': pending } } : {}) });

  /** Turns TOTP on for the user's session: the secret and the first recovery codes. Moves the clock one step on, so the next code is new. */
  async function enrolTotp(user: TestUser): Promise<{ secret: string; recoveryCodes: string[] }> {
    const started = await call('POST', '/api/me/totp', { session: user.session });
    assert.equal(started.statusCode, 200, started.body);
    const { secret } = started.json();
    const confirmed = await call('POST', '/api/me/totp/confirm', { session: user.session, payload: { code: totpCode(secret, ctx.clock.now()) } });
    assert.equal(confirmed.statusCode, 200, confirmed.body);
    ctx.clock.advance(STEP);
    return { secret, recoveryCodes: confirmed.json().recoveryCodes };
  }

  test('an account without a factor signs in exactly as before, and /api/me says it has none', async () => {
    const user = await registerUser(ctx);
    const response = await login(user, newIp());
    assert.equal(response.statusCode, 200);
    assert.deepEqual(Object.keys(response.json()), ['account']);
    assert.equal(cookieOf(response, 'sign-in'), undefined);
    assert.deepEqual((await me(sessionCookieOf(response))).secondFactor, { totp: false, passkeys: 0, recoveryCodesLeft: 0 });
  });

  test('TOTP: enrol and confirm; after signing out, sign-in needs a code; wrong, reused and stale codes are refused and counted by the rate limit', async () => {
    const user = await registerUser(ctx);
    const ip = newIp();
    const apiKey: string = (await call('POST', '/api/keys', { session: user.session, payload: { name: 'cached' } })).json().key;
    assert.deepEqual((await call('GET', '/api/me', { bearer: apiKey })).json().secondFactor, { totp: false, passkeys: 0, recoveryCodesLeft: 0 });
    const started = await call('POST', '/api/me/totp', { session: user.session });
    assert.equal(started.statusCode, 200);
    const { secret, otpauthUrl, qrSvg } = started.json();
    assert.match(secret, /^[A-Z2-7]{32}$/);
    const url = new URL(otpauthUrl);
    assert.equal(url.protocol, 'otpauth:');
    assert.equal(url.host, 'totp');
    assert.equal(url.searchParams.get('secret'), secret);
    assert.equal(url.searchParams.get('algorithm'), 'SHA1');
    assert.equal(url.searchParams.get('digits'), '6');
    assert.equal(url.searchParams.get('period'), '30');
    assert.match(qrSvg, /<svg[\s\S]*<\/svg>/);
    assert.equal((await me(user.session)).secondFactor.totp, false, 'pending until confirmed');

    assertProblem(await call('POST', '/api/me/totp/confirm', { session: user.session, payload: { code: totpCode(secret, ctx.clock.now() - 5 * STEP) } }), 401, 'invalid_code');
    const confirmCode = totpCode(secret, ctx.clock.now());
    const confirmed = await call('POST', '/api/me/totp/confirm', { session: user.session, payload: { code: confirmCode } });
    assert.equal(confirmed.statusCode, 200);
    const { recoveryCodes } = confirmed.json();
    assert.equal(recoveryCodes.length, 10);
    assert.equal(new Set(recoveryCodes).size, 10);
    assert.deepEqual((await me(user.session)).secondFactor, { totp: true, passkeys: 0, recoveryCodesLeft: 10 });
    // An API key reads its owner with itself (and caches it): the change reaches it at once.
    assert.deepEqual((await call('GET', '/api/me', { bearer: apiKey })).json().secondFactor, { totp: true, passkeys: 0, recoveryCodesLeft: 10 });
    assertProblem(await call('POST', '/api/me/totp', { session: user.session }), 409, 'conflict');
    await settled(ctx);
    assert.ok(ctx.smtp.to(user.email).some((mail) => mail.subject === 'Two-factor authentication was turned on'));

    assert.equal((await call('POST', '/api/auth/logout', { session: user.session })).statusCode, 204);
    const response = await login(user, ip);
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { secondFactor: { required: true, methods: ['totp', 'recovery'] } });
    assert.equal(response.cookies.find((cookie) => cookie.name === 'session'), undefined);
    const pendingCookie = cookieOf(response, 'sign-in')!;
    assert.equal(pendingCookie.httpOnly, true);
    assert.equal(pendingCookie.maxAge, 300);
    const pending = pendingCookie.value;

    assertProblem(await secondStep(undefined, { code: totpCode(secret, ctx.clock.now()) }, ip), 401, 'sign_in_expired');
    const wrong = totpCode(secret, ctx.clock.now()) === '000000' ? '111111' : '000000';
    assertProblem(await secondStep(pending, { code: wrong }, ip), 401, 'invalid_code');
    assertProblem(await secondStep(pending, { code: confirmCode }, ip), 401, 'invalid_code'); // reused: the confirmation's own code
    assertProblem(await secondStep(pending, { code: totpCode(secret, ctx.clock.now() - 3 * STEP) }, ip), 401, 'invalid_code'); // stale
    assertProblem(await secondStep(pending, { code: '12345', passkey: undefined }, ip), 401, 'invalid_code');
    ctx.clock.advance(STEP);
    const code = totpCode(secret, ctx.clock.now());
    const done = await secondStep(pending, { code }, ip);
    assert.equal(done.statusCode, 200, done.body);
    assert.equal(done.json().account.id, user.id);
    const session = sessionCookieOf(done);
    assert.equal((await call('GET', '/api/me', { session })).statusCode, 200);
    assertProblem(await secondStep(pending, { code }, ip), 401, 'sign_in_expired'); // the pending sign-in is over

    // Attempts on the account so far: 1 password, 5 codes (neither the one without a pending sign-in nor the one after it reached the account).
    // The sign-in limit is 10 per 15 minutes, passwords and codes together.
    const again = await startSignIn(user, ip); // 7
    assertProblem(await secondStep(again, { code }, ip), 401, 'invalid_code'); // 8: reused
    assertProblem(await secondStep(again, { code: wrong }, ip), 401, 'invalid_code'); // 9
    assertProblem(await secondStep(again, { code: wrong }, ip), 401, 'invalid_code'); // 10
    const limited = await secondStep(again, { code: totpCode(secret, ctx.clock.now() + STEP) }, ip); // 11: even a right code
    assertProblem(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) > 0);
    ctx.clock.advance(15 * MINUTE);
    assertProblem(await secondStep(again, { code: totpCode(secret, ctx.clock.now()) }, ip), 401, 'sign_in_expired'); // 5 minutes have long passed
  });

  test('a recovery code works once; new codes make the old ones stop working and need a recent authentication', async () => {
    const user = await registerUser(ctx);
    const ip = newIp();
    const { secret, recoveryCodes } = await enrolTotp(user);
    const first = await secondStep(await startSignIn(user, ip), { code: recoveryCodes[0] }, ip);
    assert.equal(first.statusCode, 200, first.body);
    assert.equal((await me(sessionCookieOf(first))).secondFactor.recoveryCodesLeft, 9);
    assertProblem(await secondStep(await startSignIn(user, ip), { code: recoveryCodes[0] }, ip), 401, 'invalid_code');
    // Typed as people copy codes: upper case, a space.
    const second = await secondStep(await startSignIn(user, ip), { code: ` ${recoveryCodes[1]!.toUpperCase()}` }, ip);
    assert.equal(second.statusCode, 200, second.body);
    await settled(ctx);
    assert.ok(ctx.smtp.to(user.email).some((mail) => mail.subject === 'A recovery code was used'));

    const session = sessionCookieOf(second);
    const renewed = await call('POST', '/api/me/recovery-codes', { session });
    assert.equal(renewed.statusCode, 200, renewed.body);
    const fresh: string[] = renewed.json().recoveryCodes;
    assert.equal(fresh.length, 10);
    assert.deepEqual((await me(session)).secondFactor.recoveryCodesLeft, 10);
    ctx.clock.advance(15 * MINUTE); // a fresh rate-limit window
    assertProblem(await secondStep(await startSignIn(user, ip), { code: recoveryCodes[2] }, ip), 401, 'invalid_code');
    assert.equal((await secondStep(await startSignIn(user, ip), { code: fresh[0] }, ip)).statusCode, 200);

    // Ten minutes after the sign-in, new codes need the holder to confirm who they are.
    ctx.clock.advance(10 * MINUTE + 1);
    assertProblem(await call('POST', '/api/me/recovery-codes', { session }), 403, 'reauthentication_required');
    const reauthenticated = await call('POST', '/api/me/reauthenticate', { session, payload: { code: totpCode(secret, ctx.clock.now()) }, ip });
    assert.equal(reauthenticated.statusCode, 200, reauthenticated.body);
    assert.deepEqual(reauthenticated.json(), { ok: true });
    assert.equal((await call('POST', '/api/me/recovery-codes', { session })).statusCode, 200);
  });

  test('turning TOTP off needs a recent authentication, then a code or the password; sign-in is then as before', async () => {
    const user = await registerUser(ctx);
    const ip = newIp();
    const { secret } = await enrolTotp(user);
    ctx.clock.advance(10 * MINUTE + 1);
    assertProblem(await call('DELETE', '/api/me/totp', { session: user.session, payload: { password: user.password } }), 403, 'reauthentication_required');
    assertProblem(await call('POST', '/api/me/reauthenticate', { session: user.session, payload: { password: 'not the password' }, ip }), 401, 'invalid_credentials');
    assertProblem(await call('POST', '/api/me/reauthenticate', { session: user.session, payload: { password: user.password, code: '123456' }, ip }), 400, 'invalid_request');
    assert.equal((await call('POST', '/api/me/reauthenticate', { session: user.session, payload: { password: user.password }, ip })).statusCode, 200);
    assertProblem(await call('DELETE', '/api/me/totp', { session: user.session, payload: { password: 'not the password' }, ip }), 401, 'invalid_credentials');
    assertProblem(await call('DELETE', '/api/me/totp', { session: user.session, payload: { code: totpCode(secret, ctx.clock.now() - 4 * STEP) }, ip }), 401, 'invalid_code');
    assertProblem(await call('DELETE', '/api/me/totp', { session: user.session, payload: {}, ip }), 400, 'invalid_request');
    assert.equal((await call('DELETE', '/api/me/totp', { session: user.session, payload: { code: totpCode(secret, ctx.clock.now()) }, ip })).statusCode, 204);
    assert.deepEqual((await me(user.session)).secondFactor, { totp: false, passkeys: 0, recoveryCodesLeft: 0 });
    assertProblem(await call('DELETE', '/api/me/totp', { session: user.session, payload: { password: user.password }, ip }), 409, 'conflict');
    await settled(ctx);
    assert.ok(ctx.smtp.to(user.email).some((mail) => mail.subject === 'Two-factor authentication was turned off'));
    const response = await login(user, ip);
    assert.equal(response.statusCode, 200);
    assert.equal(response.json().account.id, user.id);
  });

  test('a password reset does not get past the factor: the next step still asks for it', async () => {
    const user = await registerUser(ctx);
    const ip = newIp();
    const { secret } = await enrolTotp(user);
    assert.equal((await call('POST', '/api/auth/forgot', { payload: { email: user.email }, ip })).statusCode, 200);
    await settled(ctx);
    const { token } = linkIn(ctx.smtp.to(user.email).filter((mail) => mail.subject === 'Reset your password').at(-1)!, '/reset-password');
    const reset = await call('POST', '/api/auth/reset', { payload: { token, password: 'a brand new password' }, ip });
    assert.equal(reset.statusCode, 200, reset.body);
    assert.deepEqual(reset.json(), { secondFactor: { required: true, methods: ['totp', 'recovery'] } });
    assert.equal(reset.cookies.find((cookie) => cookie.name === 'session'), undefined, 'no session from the link alone');
    assertProblem(await call('GET', '/api/me', { session: user.session }), 401, 'unauthenticated'); // every session was signed out
    const done = await secondStep(cookieOf(reset, 'sign-in')!.value, { code: totpCode(secret, ctx.clock.now()) }, ip);
    assert.equal(done.statusCode, 200, done.body);
    // And the next sign-in with the new password asks again.
    const next = await login({ ...user, password: 'a brand new password' }, ip);
    assert.deepEqual(next.json(), { secondFactor: { required: true, methods: ['totp', 'recovery'] } });
  });

  test('creating an API key from the dashboard needs a recent authentication; with an API key it does not', async () => {
    const user = await registerUser(ctx);
    const created = await call('POST', '/api/keys', { session: user.session, payload: { name: 'fresh' } });
    assert.equal(created.statusCode, 201);
    ctx.clock.advance(10 * MINUTE + 1);
    assertProblem(await call('POST', '/api/keys', { session: user.session, payload: { name: 'late' } }), 403, 'reauthentication_required');
    assert.equal((await call('POST', '/api/keys', { bearer: created.json().key, payload: { name: 'by key' } })).statusCode, 201);
    assert.equal((await call('POST', '/api/me/reauthenticate', { session: user.session, payload: { password: user.password }, ip: newIp() })).statusCode, 200);
    assert.equal((await call('POST', '/api/keys', { session: user.session, payload: { name: 'late' } })).statusCode, 201);
  });

  test('passkeys: register several, list, rename; sign in with one alone, or as the second step; remove', async () => {
    const user = await registerUser(ctx);
    const ip = newIp();
    const authenticator = softwareAuthenticator();
    const register = async (name: string, session = user.session) => {
      const options = (await call('POST', '/api/me/passkeys/options', { session })).json();
      return call('POST', '/api/me/passkeys', { session, payload: { name, response: authenticator.register(options, PUBLIC_URL) } });
    };

    const options = (await call('POST', '/api/me/passkeys/options', { session: user.session })).json();
    assert.equal(options.rp.id, 'localhost');
    assert.equal(options.authenticatorSelection.residentKey, 'required');
    const response = authenticator.register(options, PUBLIC_URL);
    const added = await call('POST', '/api/me/passkeys', { session: user.session, payload: { name: 'Laptop', response } });
    assert.equal(added.statusCode, 201, added.body);
    const laptop = added.json();
    assert.deepEqual(Object.keys(laptop).sort(), ['createdAt', 'id', 'lastUsedAt', 'name']);
    assert.equal(laptop.name, 'Laptop');
    assert.equal(laptop.lastUsedAt, null);
    assertProblem(await call('POST', '/api/me/passkeys', { session: user.session, payload: { name: 'Again', response } }), 400, 'invalid_request'); // the challenge works once
    // An answer for another origin is refused.
    const foreign = authenticator.register((await call('POST', '/api/me/passkeys/options', { session: user.session })).json(), 'https://evil.example');
    assertProblem(await call('POST', '/api/me/passkeys', { session: user.session, payload: { name: 'Evil', response: foreign } }), 400, 'invalid_request');
    assert.equal((await register('Phone')).statusCode, 201);
    const listed = (await call('GET', '/api/me/passkeys', { session: user.session })).json();
    assert.deepEqual(listed.data.map((passkey: { name: string }) => passkey.name), ['Phone', 'Laptop']);
    assert.equal(listed.nextCursor, null);
    assert.equal((await me(user.session)).secondFactor.passkeys, 2);
    const renamed = await call('PATCH', `/api/me/passkeys/${laptop.id}`, { session: user.session, payload: { name: 'Work laptop' } });
    assert.equal(renamed.json().name, 'Work laptop');

    // A passkey alone adds no step to password sign-in.
    assert.deepEqual(Object.keys((await login(user, ip)).json()), ['account']);

    // Without a password: the options set a cookie that binds the challenge to this browser.
    const signInOptions = await call('POST', '/api/auth/passkey/options', { ip });
    const browser = cookieOf(signInOptions, 'passkey-sign-in')!.value;
    assert.equal(signInOptions.json().rpId, 'localhost');
    assert.equal(signInOptions.json().userVerification, 'required');
    const assertion = authenticator.authenticate(signInOptions.json(), PUBLIC_URL, { credentialId: response.id as string });
    assertProblem(await call('POST', '/api/auth/passkey', { payload: { response: assertion }, ip }), 401, 'invalid_passkey'); // not from this browser
    const signedIn = await call('POST', '/api/auth/passkey', { payload: { response: assertion }, cookies: { 'passkey-sign-in': browser }, ip });
    assert.equal(signedIn.statusCode, 200, signedIn.body);
    assert.equal(signedIn.json().account.id, user.id);
    assert.equal((await call('GET', '/api/me', { session: sessionCookieOf(signedIn) })).statusCode, 200);
    assertProblem(await call('POST', '/api/auth/passkey', { payload: { response: assertion }, cookies: { 'passkey-sign-in': browser }, ip }), 401, 'invalid_passkey'); // replay
    const unverifiedOptions = await call('POST', '/api/auth/passkey/options', { ip });
    const unverified = authenticator.authenticate(unverifiedOptions.json(), PUBLIC_URL, { userVerified: false });
    assertProblem(await call('POST', '/api/auth/passkey', { payload: { response: unverified }, cookies: { 'passkey-sign-in': cookieOf(unverifiedOptions, 'passkey-sign-in')!.value }, ip }), 401, 'invalid_passkey');
    const used = (await call('GET', '/api/me/passkeys', { session: user.session })).json().data.find((passkey: { id: string }) => passkey.id === laptop.id);
    assert.equal(used.lastUsedAt, new Date(ctx.clock.now()).toISOString());

    // With TOTP on, a passkey completes the second step too.
    await enrolTotp(user);
    const password = await login(user, ip);
    assert.deepEqual(password.json(), { secondFactor: { required: true, methods: ['totp', 'recovery', 'passkey'] } });
    const pending = cookieOf(password, 'sign-in')!.value;
    assertProblem(await call('POST', '/api/auth/login/second-factor/options', { ip }), 401, 'sign_in_expired');
    const stepOptions = (await call('POST', '/api/auth/login/second-factor/options', { cookies: { 'sign-in': pending }, ip })).json();
    assert.equal(stepOptions.allowCredentials.length, 2);
    const stepped = await secondStep(pending, { passkey: authenticator.authenticate(stepOptions, PUBLIC_URL) }, ip);
    assert.equal(stepped.statusCode, 200, stepped.body);

    // Another account's passkey is not found; removing one of ours needs a recent authentication.
    const stranger = await registerUser(ctx);
    assertProblem(await call('DELETE', `/api/me/passkeys/${laptop.id}`, { session: stranger.session }), 404, 'not_found');
    ctx.clock.advance(10 * MINUTE + 1);
    assertProblem(await call('DELETE', `/api/me/passkeys/${laptop.id}`, { session: user.session }), 403, 'reauthentication_required');
    assert.equal((await call('POST', '/api/me/reauthenticate', { session: user.session, payload: { password: user.password }, ip })).statusCode, 200);
    assert.equal((await call('DELETE', `/api/me/passkeys/${laptop.id}`, { session: user.session })).statusCode, 204);
    assert.equal((await me(user.session)).secondFactor.passkeys, 1);
    await settled(ctx);
    const subjects = ctx.smtp.to(user.email).map((mail) => mail.subject);
    assert.ok(subjects.includes('A passkey was added to your account'));
    assert.ok(subjects.includes('A passkey was removed from your account'));
  });
});
