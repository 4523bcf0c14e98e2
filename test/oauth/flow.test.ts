import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asBearer, asSession, createApiKey, createTestApp, reauthenticate, registerUser, settled, type TestContext, type TestUser } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';
import { answerConsent, connectApplication, mcpCall, pkcePair, REDIRECT_URI, registerClient, startAuthorization, tokenRequest } from '../support/oauth.ts';

/** The OAuth flow the way a connector drives it, request by request, against the real service (CONTRACT 14). */
describe('OAuth 2.1 for /api/mcp: authorization code with PKCE, resource-bound tokens, rotation, revocation', () => {
  let ctx: TestContext;
  let user: TestUser;
  const mcpUrl = () => `${ctx.config.publicUrl}/api/mcp`;

  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
  });
  after(async () => ctx.close());

  test('discovery starts from the 401: protected resource metadata, then the authorization server metadata', async () => {
    const refused = await ctx.app.inject({ method: 'POST', url: '/api/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    assertProblem(refused, 401, 'unauthenticated');
    const challenge = String(refused.headers['www-authenticate']);
    const metadataUrl = new URL(/resource_metadata="([^"]+)"/.exec(challenge)![1]!);
    assert.equal(metadataUrl.toString(), `${ctx.config.publicUrl}/.well-known/oauth-protected-resource/api/mcp`);
    const unknownToken = await ctx.app.inject({ method: 'POST', url: '/api/mcp', headers: asBearer('tmo_nope'), payload: {} });
    assert.match(String(unknownToken.headers['www-authenticate']), /^Bearer resource_metadata="[^"]+", error="invalid_token"$/);

    const resource = (await ctx.app.inject({ method: 'GET', url: metadataUrl.pathname })).json();
    assert.equal(resource.resource, mcpUrl());
    assert.deepEqual(resource.authorization_servers, [ctx.config.publicUrl]);

    const server = (await ctx.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).json();
    assert.equal(server.issuer, ctx.config.publicUrl);
    assert.deepEqual(server.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(server.response_types_supported, ['code']);
    assert.equal(server.authorization_response_iss_parameter_supported, true);
    assert.equal(server.client_id_metadata_document_supported, true);
    for (const [field, path] of [['authorization_endpoint', '/oauth/authorize'], ['token_endpoint', '/oauth/token'], ['registration_endpoint', '/oauth/register'], ['revocation_endpoint', '/oauth/revoke']]) {
      assert.equal(server[field!], `${ctx.config.publicUrl}${path}`, field);
    }
  });

  test('code → tokens (tmo_/tmr_, 1 hour, stored hashed), tools with the token, a notice mail, refresh rotation, reuse revokes the grant', async () => {
    const clientId = await registerClient(ctx);
    const authorization = await startAuthorization(ctx, clientId);
    const consent = await ctx.app.inject({ method: 'GET', url: `/api/oauth/consent/${authorization.uid}`, headers: asSession(user.session, ctx.config.publicUrl) });
    assert.equal(consent.statusCode, 200, consent.body);
    assert.deepEqual(consent.json().client, { id: clientId, name: 'Test Connector', redirectHost: '127.0.0.1:47123' });

    const back = await answerConsent(ctx, user, authorization, 'allow');
    assert.equal(`${back.origin}${back.pathname}`, REDIRECT_URI);
    assert.equal(back.searchParams.get('state'), 'st4te');
    assert.equal(back.searchParams.get('iss'), ctx.config.publicUrl, 'RFC 9207');
    const code = back.searchParams.get('code')!;

    const exchange = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: authorization.verifier };
    const issued = await tokenRequest(ctx, exchange);
    assert.equal(issued.statusCode, 200, issued.body);
    assert.match(String(issued.headers['cache-control']), /no-store/);
    const tokens = issued.json();
    assert.match(tokens.access_token, /^tmo_[0-9A-Za-z]{38}$/);
    assert.match(tokens.refresh_token, /^tmr_[0-9A-Za-z]{38}$/);
    assert.equal(tokens.expires_in, 3600);
    assert.equal(tokens.token_type, 'Bearer');

    const stored = JSON.stringify(await ctx.app.deps.db.selectFrom('oauth_records').selectAll().execute());
    for (const token of [tokens.access_token, tokens.refresh_token, code]) assert.ok(!stored.includes(token), 'no token in the clear');

    const list = await mcpCall(ctx, tokens.access_token, 'tools/list');
    assert.equal(list.statusCode, 200, list.body);
    assert.ok(list.json().result.tools.some((tool: { name: string }) => tool.name === 'event_webhooks_list'));
    const call = await mcpCall(ctx, tokens.access_token, 'tools/call', { name: 'event_webhooks_list', arguments: {} });
    assert.deepEqual(call.json().result.structuredContent, { data: [], nextCursor: null });

    await settled(ctx);
    const notice = ctx.smtp.to(user.email).find((mail) => mail.subject === 'A new application was connected to your account');
    assert.ok(notice, 'a security notice');
    assert.match(notice.text, /Test Connector \(127\.0\.0\.1:47123\)/);

    const applications = (await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(user.session, ctx.config.publicUrl) })).json().data;
    assert.equal(applications.length, 1);
    assert.equal(applications[0].clientName, 'Test Connector');
    assert.match(applications[0].lastUsedAt, /^\d{4}-/, 'last used is recorded');

    const refreshed = await tokenRequest(ctx, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId });
    assert.equal(refreshed.statusCode, 200, refreshed.body);
    const next = refreshed.json();
    assert.notEqual(next.refresh_token, tokens.refresh_token, 'rotated');
    assert.equal((await mcpCall(ctx, next.access_token, 'tools/list')).statusCode, 200);

    const replay = await tokenRequest(ctx, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId });
    assert.equal(replay.statusCode, 400);
    assert.equal(replay.json().error, 'invalid_grant');
    for (const token of [tokens.access_token, next.access_token]) {
      assertProblem(await mcpCall(ctx, token, 'tools/list'), 401, 'unauthenticated');
    }
    const rotatedRefresh = await tokenRequest(ctx, { grant_type: 'refresh_token', refresh_token: next.refresh_token, client_id: clientId });
    assert.equal(rotatedRefresh.json().error, 'invalid_grant', 'the whole grant is revoked');
    assert.deepEqual((await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(user.session, ctx.config.publicUrl) })).json().data, []);
  });

  test('revocation from the dashboard ends the tokens at once; RFC 7009 revocation too', async () => {
    const clientId = await registerClient(ctx);
    const tokens = await connectApplication(ctx, user, clientId);
    const [application] = (await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(user.session, ctx.config.publicUrl) })).json().data;
    const revoked = await ctx.app.inject({ method: 'DELETE', url: `/api/me/applications/${application.id}`, headers: asSession(user.session, ctx.config.publicUrl) });
    assert.equal(revoked.statusCode, 204);
    assertProblem(await mcpCall(ctx, tokens.access_token, 'tools/list'), 401, 'unauthenticated');
    assert.equal((await tokenRequest(ctx, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })).json().error, 'invalid_grant');

    const again = await connectApplication(ctx, user, clientId);
    const revocation = await ctx.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ token: again.access_token, client_id: clientId }).toString() });
    assert.equal(revocation.statusCode, 200, revocation.body);
    assertProblem(await mcpCall(ctx, again.access_token, 'tools/list'), 401, 'unauthenticated');
  });

  test('deny: the client gets access_denied, and no application is connected', async () => {
    const other = await registerUser(ctx);
    const clientId = await registerClient(ctx);
    const back = await answerConsent(ctx, other, await startAuthorization(ctx, clientId), 'deny');
    assert.equal(back.searchParams.get('error'), 'access_denied');
    assert.equal(back.searchParams.get('code'), null);
    assert.deepEqual((await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(other.session, ctx.config.publicUrl) })).json().data, []);
  });

  describe('refused, each with the error its RFC names', () => {
    test('a wrong PKCE verifier (RFC 7636: invalid_grant); a code used twice (invalid_grant, and its tokens revoked); PKCE missing or plain (invalid_request)', async () => {
      const clientId = await registerClient(ctx);
      const authorization = await startAuthorization(ctx, clientId);
      const code = (await answerConsent(ctx, user, authorization, 'allow')).searchParams.get('code')!;
      const wrong = await tokenRequest(ctx, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: pkcePair().verifier });
      assert.equal(wrong.statusCode, 400);
      assert.equal(wrong.json().error, 'invalid_grant');
      assert.match(String(wrong.headers['cache-control']), /no-store/);

      const exchange = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: authorization.verifier };
      const issued = await tokenRequest(ctx, exchange);
      assert.equal(issued.statusCode, 200, 'the right verifier still works');
      const reused = await tokenRequest(ctx, exchange);
      assert.equal(reused.statusCode, 400);
      assert.equal(reused.json().error, 'invalid_grant', 'a code works once');
      assertProblem(await mcpCall(ctx, issued.json().access_token, 'tools/list'), 401, 'unauthenticated');

      for (const params of [{ code_challenge: '', code_challenge_method: '' }, { code_challenge_method: 'plain' }]) {
        const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT_URI, state: 's', scope: 'mcp', code_challenge: pkcePair().challenge, ...params });
        for (const [name, value] of [...query]) if (value === '') query.delete(name);
        const response = await ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
        assert.equal(response.statusCode, 303);
        const location = new URL(String(response.headers.location));
        assert.equal(`${location.origin}${location.pathname}`, REDIRECT_URI);
        assert.equal(location.searchParams.get('error'), 'invalid_request', JSON.stringify(params));
      }
    });

    test('a redirect URI not registered: an error page, never a redirect there (RFC 6749 4.1.2.1)', async () => {
      const clientId = await registerClient(ctx);
      const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: 'https://attacker.example/callback', code_challenge: pkcePair().challenge, code_challenge_method: 'S256', scope: 'mcp' });
      const response = await ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
      assert.equal(response.statusCode, 400);
      assert.equal(response.headers.location, undefined);
      assert.match(response.body, /invalid_redirect_uri/);
    });

    test('a token for another resource (RFC 8707: invalid_target)', async () => {
      const clientId = await registerClient(ctx);
      const response = await ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT_URI, code_challenge: pkcePair().challenge, code_challenge_method: 'S256', scope: 'mcp', resource: 'https://other.example/mcp' })}` });
      assert.equal(response.statusCode, 303);
      assert.equal(new URL(String(response.headers.location)).searchParams.get('error'), 'invalid_target');

      const authorization = await startAuthorization(ctx, clientId);
      const code = (await answerConsent(ctx, user, authorization, 'allow')).searchParams.get('code')!;
      const exchange = await tokenRequest(ctx, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId, code_verifier: authorization.verifier, resource: 'https://other.example/mcp' });
      assert.equal(exchange.statusCode, 400);
      assert.equal(exchange.json().error, 'invalid_target');
    });

    test('an expired access token (RFC 6750: 401 invalid_token)', async () => {
      const tokens = await connectApplication(ctx, user, await registerClient(ctx));
      assert.equal((await mcpCall(ctx, tokens.access_token, 'tools/list')).statusCode, 200);
      ctx.clock.advance(3600 * 1000 + 1);
      const expired = await mcpCall(ctx, tokens.access_token, 'tools/list');
      assertProblem(expired, 401, 'unauthenticated');
      assert.match(String(expired.headers['www-authenticate']), /error="invalid_token"/);
    });

    test('an access token on /api/keys or on a machine\'s MCP endpoint (403 forbidden); an API key still works on /api/mcp', async () => {
      const tokens = await connectApplication(ctx, user, await registerClient(ctx));
      assertProblem(await ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asBearer(tokens.access_token) }), 403, 'forbidden');
      await reauthenticate(ctx, user); // the clock has moved an hour on (the expired-token test): a key needs a recent sign-in
      const key = await createApiKey(ctx, user);
      const machine = await ctx.app.inject({ method: 'POST', url: '/api/machines', headers: asBearer(key), payload: { name: 'oauth-target' } });
      assert.equal(machine.statusCode, 201, machine.body);
      assertProblem(await mcpCall(ctx, tokens.access_token, 'tools/list', {}, `/api/machines/${machine.json().id}/mcp`), 403, 'forbidden');
      assert.equal((await mcpCall(ctx, key, 'tools/list')).statusCode, 200);
    });

    test('a consent forged from another site (403 cross_site), and consent without a session (401)', async () => {
      const authorization = await startAuthorization(ctx, await registerClient(ctx));
      const url = `/api/oauth/consent/${authorization.uid}/allow`;
      const cookie = asSession(user.session, ctx.config.publicUrl).cookie;
      for (const headers of [{ cookie, origin: 'https://evil.example' }, { cookie, 'sec-fetch-site': 'cross-site' }, { cookie }]) {
        assertProblem(await ctx.app.inject({ method: 'POST', url, headers }), 403, 'cross_site');
      }
      assertProblem(await ctx.app.inject({ method: 'POST', url, headers: { origin: ctx.config.publicUrl } }), 401, 'unauthenticated');
      await reauthenticate(ctx, user);
      const key = await createApiKey(ctx, user);
      assertProblem(await ctx.app.inject({ method: 'POST', url, headers: asBearer(key) }), 403, 'forbidden');
      assertProblem(await ctx.app.inject({ method: 'GET', url: '/api/oauth/consent/unknown-uid', headers: asSession(user.session, ctx.config.publicUrl) }), 404, 'not_found');
      const back = await answerConsent(ctx, user, authorization, 'allow');
      assert.ok(back.searchParams.get('code'), 'the genuine consent still works');
      assertProblem(await ctx.app.inject({ method: 'POST', url, headers: asSession(user.session, ctx.config.publicUrl) }), 404, 'not_found');
    });

    test("another account's grant: not listed, not revocable (404), its token acts only for its own account", async () => {
      const tokens = await connectApplication(ctx, user, await registerClient(ctx));
      const stranger = await registerUser(ctx);
      const mine = (await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(user.session, ctx.config.publicUrl) })).json().data;
      assert.deepEqual((await ctx.app.inject({ method: 'GET', url: '/api/me/applications', headers: asSession(stranger.session, ctx.config.publicUrl) })).json().data, []);
      assertProblem(await ctx.app.inject({ method: 'DELETE', url: `/api/me/applications/${mine[0].id}`, headers: asSession(stranger.session, ctx.config.publicUrl) }), 404, 'not_found');
      const strangerKey = await createApiKey(ctx, stranger);
      const created = await mcpCall(ctx, strangerKey, 'tools/call', { name: 'event_webhook_create', arguments: { url: 'https://stranger.example/hook' } });
      const strangerEndpoint = created.json().result.structuredContent.id;
      const seen = await mcpCall(ctx, tokens.access_token, 'tools/call', { name: 'event_webhook_test', arguments: { id: strangerEndpoint } });
      assert.equal(seen.json().result.structuredContent.error.code, 'not_found');
      assert.equal((await mcpCall(ctx, tokens.access_token, 'tools/list')).statusCode, 200, 'still valid');
    });
  });
});
