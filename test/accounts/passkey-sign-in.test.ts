import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { createTestApp, PUBLIC_URL, registerUser, sessionCookieOf, type TestContext, type TestUser } from '../support/app.ts';
import { freshDatabase, onPostgres } from '../support/database.ts';
import { assertProblem } from '../support/problem.ts';
import { softwareAuthenticator, type SoftwareAuthenticator } from '../support/webauthn.ts';

const COOKIE = 'passkey-sign-in';
const FIVE_MINUTES = 5 * 60_000;

/** Rows in every table of the app's database, by table. */
async function rowCounts(ctx: TestContext): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of await ctx.app.deps.db.introspection.getTables()) {
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table.name)}`.execute(ctx.app.deps.db);
    counts[table.name] = Number(rows[0]!.n);
  }
  return counts;
}

const cookieOf = (response: LightMyRequestResponse) => response.cookies.find((cookie) => cookie.name === COOKIE && cookie.value !== '');

function options(ctx: TestContext, ip: string) {
  return ctx.app.inject({ method: 'POST', url: '/api/auth/passkey/options', headers: { origin: PUBLIC_URL }, remoteAddress: ip });
}

function signIn(ctx: TestContext, cookie: string | undefined, response: Record<string, unknown>, ip: string) {
  return ctx.app.inject({
    method: 'POST',
    url: '/api/auth/passkey',
    headers: { origin: PUBLIC_URL, ...(cookie === undefined ? {} : { cookie: `${COOKIE}=${cookie}` }) },
    remoteAddress: ip,
    payload: { response },
  });
}

/** A user with a passkey on a software authenticator. */
async function userWithPasskey(ctx: TestContext): Promise<{ user: TestUser; authenticator: SoftwareAuthenticator }> {
  const user = await registerUser(ctx);
  const authenticator = softwareAuthenticator();
  const headers = { origin: PUBLIC_URL, cookie: `session=${user.session}` };
  const creation = (await ctx.app.inject({ method: 'POST', url: '/api/me/passkeys/options', headers })).json();
  const added = await ctx.app.inject({ method: 'POST', url: '/api/me/passkeys', headers, payload: { name: 'Laptop', response: authenticator.register(creation, PUBLIC_URL) } });
  assert.equal(added.statusCode, 201, added.body);
  return { user, authenticator };
}

/** As a synced passkey answers (its signature counter stays 0): nothing but the challenge tells one use of it from the next. */
function answer(authenticator: SoftwareAuthenticator, requestOptions: { challenge: string; rpId?: string }) {
  authenticator.credentials[0]!.counter = -1;
  return authenticator.authenticate(requestOptions, PUBLIC_URL);
}

const sessionsOf = async (ctx: TestContext, user: TestUser) =>
  Number((await ctx.app.deps.db.selectFrom('sessions').select((eb) => eb.fn.countAll().as('n')).where('account_id', '=', user.id).executeTakeFirstOrThrow()).n);

/** Issue 38, point 7: the passwordless sign-in's options stored a challenge per request, for anyone, without limit. */
describe('passkey sign-in without a password: the challenge rides in a signed cookie', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  test('regression: 300 options requests add no row; the cookie is HttpOnly, SameSite=Strict and lasts 5 minutes', async () => {
    // The first use makes the signing key (one row, once, for every process).
    assert.equal((await options(ctx, '203.0.113.1')).statusCode, 200);
    const before = await rowCounts(ctx);
    let first: LightMyRequestResponse | undefined;
    for (let i = 0; i < 300; i++) {
      const response = await options(ctx, `203.0.113.${(i % 200) + 1}`);
      assert.equal(response.statusCode, 200);
      first ??= response;
    }
    assert.deepEqual(await rowCounts(ctx), before);
    const cookie = cookieOf(first!);
    assert.ok(cookie, 'a challenge cookie');
    assert.deepEqual({ httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path, maxAge: cookie.maxAge }, { httpOnly: true, sameSite: 'Strict', path: '/', maxAge: 300 });
    assert.ok(cookie.value.startsWith(`${first!.json().challenge}.`), 'it carries the challenge of the options');
  });

  test('a forged, altered or expired cookie is refused with a clear 401 and changes nothing', async () => {
    const { user, authenticator } = await userWithPasskey(ctx);
    const ip = '203.0.114.1';
    const sessions = await sessionsOf(ctx, user);
    const notIssued = /not issued by this service or was altered/;

    // Forged: a challenge of one's own, "signed" with a key of one's own.
    const forgedChallenge = randomBytes(32).toString('base64url');
    const forged = `${forgedChallenge}.${ctx.clock.now() + FIVE_MINUTES}.${randomBytes(32).toString('base64url')}`;
    const forgedAnswer = answer(authenticator, { challenge: forgedChallenge, rpId: 'localhost' });
    const refusedForged = await signIn(ctx, forged, forgedAnswer, ip);
    assertProblem(refusedForged, 401, 'invalid_passkey');
    assert.match(refusedForged.json().detail, notIssued);

    // Altered: a real cookie with a later expiry, or with another challenge under the same signature.
    const issued = await options(ctx, ip);
    const [challenge, expiresAt, mac] = cookieOf(issued)!.value.split('.');
    const realAnswer = answer(authenticator, issued.json());
    for (const altered of [`${challenge}.${Number(expiresAt) + 3_600_000}.${mac}`, `${forgedChallenge}.${expiresAt}.${mac}`, `${challenge}.${expiresAt}`, 'garbage']) {
      const refused = await signIn(ctx, altered, altered.startsWith(forgedChallenge) ? forgedAnswer : realAnswer, ip);
      assertProblem(refused, 401, 'invalid_passkey');
      assert.match(refused.json().detail, notIssued, altered);
    }

    // Expired: the real cookie, a moment past its 5 minutes.
    ctx.clock.advance(FIVE_MINUTES + 1);
    const expired = await signIn(ctx, cookieOf(issued)!.value, realAnswer, ip);
    assertProblem(expired, 401, 'sign_in_expired');
    assert.match(expired.json().detail, /expired/);

    assert.equal(await sessionsOf(ctx, user), sessions, 'no session from any of them');
    const spent = await ctx.app.deps.db.selectFrom('spent_challenges').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(spent.n), 0, 'nothing spent');

    // A fresh ceremony still works.
    const fresh = await options(ctx, ip);
    const signedIn = await signIn(ctx, cookieOf(fresh)!.value, answer(authenticator, fresh.json()), ip);
    assert.equal(signedIn.statusCode, 200, signedIn.body);
    assert.equal(signedIn.json().account.id, user.id);
  });

  test('the same answer sent twice at once makes one session, and never works again', async () => {
    const { user, authenticator } = await userWithPasskey(ctx);
    const ip = '203.0.115.1';
    const sessions = await sessionsOf(ctx, user);
    const issued = await options(ctx, ip);
    const cookie = cookieOf(issued)!.value;
    const response = answer(authenticator, issued.json());
    const both = await Promise.all([signIn(ctx, cookie, response, ip), signIn(ctx, cookie, response, ip)]);
    assert.deepEqual(both.map((r) => r.statusCode).sort(), [200, 401], both.map((r) => r.body).join(' | '));
    assertProblem(both.find((r) => r.statusCode === 401)!, 401, 'invalid_passkey');
    assert.equal(await sessionsOf(ctx, user), sessions + 1, 'one session');
    const winner = both.find((r) => r.statusCode === 200)!;
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: { cookie: `session=${sessionCookieOf(winner)}` } })).statusCode, 200);

    const replay = await signIn(ctx, cookie, response, ip);
    assertProblem(replay, 401, 'invalid_passkey');
    assert.match(replay.json().detail, /used already/);
    assert.equal(await sessionsOf(ctx, user), sessions + 1);

    // The spent challenge goes once its cookie has expired (the maintenance pass), when the cookie is refused anyway.
    ctx.clock.advance(FIVE_MINUTES + 60_000);
    await ctx.app.jobs.drain();
    const spent = await ctx.app.deps.db.selectFrom('spent_challenges').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(spent.n), 0, 'pruned');
    assertProblem(await signIn(ctx, cookie, response, ip), 401, 'sign_in_expired');
  });
});

describe('passkey sign-in across two processes on one database', () => {
  let first: TestContext;
  let second: TestContext;
  let sqliteDir: string | undefined;
  let dropDatabase: () => Promise<void>;
  before(async () => {
    sqliteDir = onPostgres ? undefined : await mkdtemp(join(tmpdir(), 'passkey-db-'));
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

  test('a cookie one process issued signs in through the other (one signing key, made on first use)', async () => {
    const { user, authenticator } = await userWithPasskey(first);
    const issued = await options(second, '203.0.116.1');
    const signedIn = await signIn(first, cookieOf(issued)!.value, answer(authenticator, issued.json()), '203.0.116.1');
    assert.equal(signedIn.statusCode, 200, signedIn.body);
    assert.equal(signedIn.json().account.id, user.id);
  });
});
