import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { connectApplication, pkcePair, REDIRECT_URI, registerClient } from '../support/oauth.ts';

describe('OAuth storage: expired records cleaned up by maintenance', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  test('an expired access token and a finished interaction leave the table at the next maintenance pass; the grant stays', async () => {
    const user = await registerUser(ctx);
    await connectApplication(ctx, user, await registerClient(ctx));
    const db = ctx.app.deps.db;
    const kinds = async () => (await db.selectFrom('oauth_records').select('kind').execute()).map((row) => row.kind);
    assert.ok((await kinds()).includes('AccessToken'));
    ctx.clock.advance(2 * 3600 * 1000);
    await ctx.app.jobs.drain();
    const left = await kinds();
    assert.ok(!left.includes('AccessToken'), left.join());
    assert.ok(!left.includes('Interaction'), left.join());
    assert.ok(left.includes('RefreshToken') && left.includes('Grant'), 'what has not expired stays');
    assert.equal((await db.selectFrom('oauth_grants').select('id').execute()).length, 1);
  });
});

describe('Client ID Metadata Documents go through the SSRF guard of webhook targets', () => {
  let ctx: TestContext;
  let host: Receiver;
  before(async () => {
    ctx = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'off' } });
    host = await startReceiver(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{}' }));
  });
  after(async () => {
    await host.close();
    await ctx.close();
  });

  test('a client_id URL on a loopback address is refused (invalid_client), and nothing is fetched', async () => {
    const clientId = `https://127.0.0.1:${host.port}/client.json`;
    const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT_URI, code_challenge: pkcePair().challenge, code_challenge_method: 'S256', scope: 'mcp' });
    const response = await ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
    assert.equal(response.statusCode, 400);
    assert.match(response.body, /invalid_client/);
    assert.equal(host.requests.length, 0);
  });
});
