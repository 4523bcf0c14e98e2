import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { isAllowedRedirectUri } from '../../src/oauth/redirect-uris.ts';
import { createTestApp, type TestContext } from '../support/app.ts';
import { pkcePair, registerClient } from '../support/oauth.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';

const ALLOWED = [
  'https://claude.ai/api/mcp/auth_callback',
  'https://connector.example:8443/callback?tenant=1',
  'https://localhost/callback',
  'http://localhost/callback',
  'http://localhost:33418/callback',
  'http://127.0.0.1/callback',
  'http://127.0.0.1:47123/callback',
  'http://[::1]:6274/oauth/callback',
  'http://LOCALHOST:80/cb',
];

const REFUSED = [
  'http://evil.example/callback',
  'http://localhost.evil.example/callback',
  'http://127.0.0.1.nip.io/callback',
  'http://10.0.0.7/callback',
  'http://[::2]/callback',
  'com.example.app:/oauth2redirect',
  'cursor://anysphere.cursor-mcp/oauth/callback',
  'javascript:alert(1)',
  'data:text/html,<p>hi</p>',
  'file:///etc/passwd',
  'ftp://files.example/callback',
  'not a url',
];

describe('redirect URIs: https, or http on loopback only (MCP authorization, Communication Security)', () => {
  test('the rule: https anywhere, http on localhost, 127.0.0.1 or [::1] at any port, nothing else', () => {
    for (const uri of ALLOWED) assert.equal(isAllowedRedirectUri(uri), true, uri);
    for (const uri of REFUSED) assert.equal(isAllowedRedirectUri(uri), false, uri);
  });

  let ctx: TestContext;
  let metadataHost: Receiver;
  before(async () => {
    ctx = await createTestApp();
    // Each document names its own redirect URIs in its path: /client.json?redirect=<uri>.
    metadataHost = await startReceiver((request) => {
      const redirect = new URL(request.path, 'https://host').searchParams.get('redirect')!;
      const document = { client_id: `https://127.0.0.1:${metadataHost.port}${request.path}`, client_name: 'Metadata Connector', redirect_uris: [redirect], token_endpoint_auth_method: 'none' };
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(document) };
    });
  });
  after(async () => {
    await metadataHost?.close();
    await ctx?.close();
  });

  const register = (redirectUris: string[]) =>
    ctx.app.inject({ method: 'POST', url: '/oauth/register', payload: { client_name: 'Connector', redirect_uris: redirectUris, token_endpoint_auth_method: 'none' } });

  test('Regression (issue 27): dynamic registration answered 201 to an http redirect URI that is not loopback', async () => {
    for (const redirectUris of [['http://evil.example/callback'], ['http://127.0.0.1:47123/callback', 'http://evil.example/callback'], ['com.example.app:/oauth2redirect']]) {
      const response = await register(redirectUris);
      assert.equal(response.statusCode, 400, `${redirectUris}: ${response.body}`);
      assert.match(String(response.headers['content-type']), /^application\/json/);
      assert.match(String(response.headers['cache-control']), /no-store/);
      const body = response.json();
      assert.equal(body.error, 'invalid_redirect_uri');
      assert.match(body.error_description, /https, or http on localhost/);
    }
  });

  test('loopback http at any port and https register as before', async () => {
    for (const uri of ALLOWED) {
      const response = await register([uri]);
      assert.equal(response.statusCode, 201, `${uri}: ${response.body}`);
    }
    assert.ok(await registerClient(ctx), 'the flow tests\' client too');
  });

  const authorize = (clientId: string, redirectUri: string) => {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri,
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
      scope: 'mcp',
      resource: `${ctx.config.publicUrl}/api/mcp`,
    });
    return ctx.app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
  };

  test('a Client ID Metadata Document with such a redirect URI is refused at authorization, on an error page, never redirected to', async () => {
    const redirect = 'http://evil.example/callback';
    const response = await authorize(`https://127.0.0.1:${metadataHost.port}/client.json?redirect=${encodeURIComponent(redirect)}`, redirect);
    assert.equal(response.statusCode, 400, response.body);
    assert.equal(response.headers.location, undefined);
    assert.match(String(response.headers['content-type']), /^text\/html/);
    assert.match(response.body, /invalid_redirect_uri/);
    assert.match(response.body, /https, or http on localhost/);
    assert.match(response.body, /http:\/\/evil\.example\/callback does not/);
  });

  test('a Client ID Metadata Document with a loopback redirect URI still reaches the consent page', async () => {
    const redirect = 'http://127.0.0.1:47124/callback';
    const response = await authorize(`https://127.0.0.1:${metadataHost.port}/client.json?redirect=${encodeURIComponent(redirect)}`, redirect);
    assert.equal(response.statusCode, 303, response.body);
    assert.equal(new URL(String(response.headers.location), ctx.config.publicUrl).pathname, '/oauth/consent');
  });
});
