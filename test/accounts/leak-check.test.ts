import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Type } from 'typebox';
import { asSession, createApiKey, createTestApp, registerUser, settled, type TestContext } from '../support/app.ts';
import { assertNoStoredSecretInResponses } from '../support/leaks.ts';
import { linkIn } from '../support/mail.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The leak check itself: it must catch the hash of a token whose row is gone by the end of the test. */
describe('the leak check sees tokens that no longer exist', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({
      // A deliberately leaky route, standing in for a future bug.
      setup: (app) => {
        app.get('/test/echo', {
          config: { auth: 'none' },
          schema: { querystring: Type.Object({ value: Type.String() }), response: { 200: Type.Object({ echoed: Type.String() }) } },
        }, async (request) => ({ echoed: (request.query as { value: string }).value }));
      },
    });
  });
  after(() => ctx.close());

  async function assertCaught(hash: string, what: string): Promise<void> {
    const seen = ctx.responses.length;
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/test/echo?value=${hash}` })).statusCode, 200);
    await assert.rejects(assertNoStoredSecretInResponses(ctx), /token hash/, `the hash of ${what} is caught`);
    ctx.responses.splice(seen);
  }

  test('a signed-out session, a revoked key and a used, collected emailed link', async () => {
    // Regression: the check compared only with hashes still in the database at the end of the test.
    const user = await registerUser(ctx);
    await settled(ctx);
    const verifyToken = linkIn(ctx.smtp.to(user.email).at(-1)!, '/verify-email').token;
    const key = await createApiKey(ctx, user);

    assert.equal((await ctx.app.inject({ method: 'POST', url: '/api/auth/verify', payload: { token: verifyToken } })).statusCode, 200);
    const keyId = (await ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asSession(user.session) })).json().data[0].id;
    assert.equal((await ctx.app.inject({ method: 'DELETE', url: `/api/keys/${keyId}`, headers: asSession(user.session) })).statusCode, 204);
    assert.equal((await ctx.app.inject({ method: 'POST', url: '/api/auth/logout', headers: asSession(user.session) })).statusCode, 204);
    // The maintenance job's next pass: it runs once a minute. Under load its time budget can cut a pass into
    // several, each due a little later: the clock goes on until the pass is done.
    const db = ctx.app.deps.db;
    const left = async () => (await db.selectFrom('email_tokens').select('token_hash').where('token_hash', '=', sha256(verifyToken)).execute()).length;
    for (let minute = 0; minute < 10 && (minute === 0 || (await left()) > 0); minute++) {
      ctx.clock.advance(60_000);
      await ctx.app.jobs.drain();
    }
    assert.equal((await db.selectFrom('sessions').select('id').where('token_hash', '=', sha256(user.session)).execute()).length, 0);
    assert.equal((await db.selectFrom('api_keys').select('id').where('token_hash', '=', sha256(key)).execute()).length, 0);
    assert.equal((await db.selectFrom('email_tokens').select('token_hash').where('token_hash', '=', sha256(verifyToken)).execute()).length, 0);

    await assertCaught(sha256(user.session), 'a signed-out session');
    await assertCaught(sha256(key), 'a revoked API key');
    await assertCaught(sha256(verifyToken), 'a used emailed link');
    await assertNoStoredSecretInResponses(ctx);
  });
});
