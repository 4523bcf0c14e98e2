import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { createTestApp, type TestContext } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';
import { pkcePair, REDIRECT_URI, registerClient } from '../support/oauth.ts';

const count = async (ctx: TestContext) => (await ctx.app.deps.db.selectFrom('oauth_records').select('kind').execute()).length;

/** Issue 38, point 7: the authorization server's unauthenticated endpoints stored a record per request, without limit. */
describe('OAuth endpoints that store per request are limited per address', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const register = (ip: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/oauth/register',
      remoteAddress: ip,
      payload: { client_name: 'Flood', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
    });

  test('regression: POST /oauth/register, 20 per address per hour; the 21st stores no client', async () => {
    for (let i = 0; i < 20; i++) assert.equal((await register('192.0.2.10')).statusCode, 201);
    const stored = await count(ctx);
    const limited = await register('192.0.2.10');
    assertProblem(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) <= 3600);
    assert.equal(await count(ctx), stored, 'nothing stored');
    assert.equal((await register('192.0.2.11')).statusCode, 201, 'another address is not affected');
    ctx.clock.advance(3600 * 1000);
    assert.equal((await register('192.0.2.10')).statusCode, 201, 'allowed again after the hour');
  });

  test('regression: /oauth/authorize, 100 per address per 15 minutes; the 101st stores no interaction', async () => {
    const clientId = await registerClient(ctx);
    const authorize = (ip: string) => {
      const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT_URI, code_challenge: pkcePair().challenge, code_challenge_method: 'S256', scope: 'mcp', resource: `${ctx.config.publicUrl}/api/mcp` });
      return ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}`, remoteAddress: ip });
    };
    for (let i = 0; i < 100; i++) assert.equal((await authorize('192.0.2.20')).statusCode, 303);
    const stored = await count(ctx);
    const limited = await authorize('192.0.2.20');
    assertProblem(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) <= 15 * 60);
    assert.equal(await count(ctx), stored, 'nothing stored');
    assert.equal((await authorize('192.0.2.21')).statusCode, 303, 'another address is not affected');
  });
});
