import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/client';
import type { Browser, Page } from 'playwright-core';
import { registerUser, settled, type TestUser } from '../support/app.ts';
import { launchBrowser, newContext, startLiveApp, watchConsole, type LiveApp } from '../support/browser.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { tokenRequest } from '../support/oauth.ts';

type Tokens = Awaited<ReturnType<OAuthClientProvider['tokens']>>;
type ClientInformation = Awaited<ReturnType<OAuthClientProvider['clientInformation']>>;
type Discovery = Awaited<ReturnType<NonNullable<OAuthClientProvider['discoveryState']>>>;

/**
 * What a connector keeps: its registration, tokens and PKCE verifier. The
 * browser it sends the account holder to is headless Chromium; the redirect
 * back to the connector is caught at the callback URL.
 */
class ConnectorAuth implements OAuthClientProvider {
  information: ClientInformation;
  saved: Tokens;
  verifier = '';
  authorizationUrl: URL | undefined;
  readonly clientMetadataUrl: string | undefined;
  readonly #redirectUrl: string;

  constructor(redirectUrl: string, clientMetadataUrl?: string) {
    this.#redirectUrl = redirectUrl;
    this.clientMetadataUrl = clientMetadataUrl;
  }
  get redirectUrl() {
    return this.#redirectUrl;
  }
  get clientMetadata() {
    return { client_name: 'Hosted Connector', redirect_uris: [this.#redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information: ClientInformation) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: Tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  discovery: Discovery;
  saveDiscoveryState(state: Discovery) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

describe('a connector signs in with OAuth: the official SDK client, headless Chromium for sign-in and consent', () => {
  let live: LiveApp;
  let browser: Browser;
  let user: TestUser;
  let metadataHost: Receiver;
  let callbackUrl: string;
  let callbackServer: Server;

  before(async () => {
    browser = await launchBrowser();
    live = await startLiveApp();
    user = await registerUser(live, { name: 'Ada Lovelace' });
    // The connector's redirect URI: where the browser lands with the code.
    callbackServer = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.'));
    await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
    // The connector's Client ID Metadata Document, on an https origin of its own.
    metadataHost = await startReceiver((request) => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_id: `https://127.0.0.1:${metadataHost.port}${request.path}`,
        client_name: 'Metadata Connector',
        redirect_uris: [callbackUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    }));
  });
  after(async () => {
    await browser?.close();
    await metadataHost?.close();
    callbackServer?.close();
    await live?.close();
  });

  const dataOf = (result: { structuredContent?: unknown }) => (result.structuredContent as { data?: unknown } | undefined)?.data;
  const mcpUrl = () => new URL('/api/mcp', live.baseUrl);

  /** The browser part: sign in if asked, read the consent page, allow; returns the callback URL the browser was sent to. */
  async function consentInBrowser(page: Page, authorizationUrl: URL, expectedQuestion: RegExp): Promise<URL> {
    await page.goto(authorizationUrl.toString());
    // Not signed in on the dashboard yet: the consent page sends the browser to sign in first, and back.
    await page.getByRole('heading', { name: /^(Sign in|Connect an application)$/ }).waitFor();
    if (new URL(page.url()).pathname === '/sign-in') {
      await page.getByLabel('Email address').fill(user.email);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
    }
    await page.getByRole('heading', { name: 'Connect an application' }).waitFor();
    assert.match(await page.locator('#consent-question').innerText(), expectedQuestion);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL((url) => url.toString().startsWith(callbackUrl));
    await page.getByText('You can close this window.').waitFor();
    return new URL(page.url());
  }

  async function connect(auth: ConnectorAuth): Promise<Client> {
    const client = new Client({ name: 'hosted-connector', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl(), { authProvider: auth }));
    return client;
  }

  async function signInFlow(auth: ConnectorAuth, page: Page, expectedQuestion: RegExp): Promise<Client> {
    const first = new StreamableHTTPClientTransport(mcpUrl(), { authProvider: auth });
    await assert.rejects(new Client({ name: 'hosted-connector', version: '1.0.0' }).connect(first), UnauthorizedError, 'a 401 starts the flow');
    assert.ok(auth.authorizationUrl, 'discovered from the 401 and sent to the authorization endpoint');
    assert.equal(auth.authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(auth.authorizationUrl.searchParams.get('resource'), mcpUrl().toString());
    const callback = await consentInBrowser(page, auth.authorizationUrl, expectedQuestion);
    await first.finishAuth(callback.searchParams);
    assert.match(String(auth.saved?.access_token), /^tmo_/);
    return connect(auth);
  }

  const refused = async (token: string) =>
    (await fetch(mcpUrl(), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) })).status === 401;

  test('dynamic client registration: discovery, sign-in, consent, PKCE, tools, refresh, a replayed refresh token revokes the grant', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    const problems = watchConsole(page);
    const auth = new ConnectorAuth(callbackUrl);
    const client = await signInFlow(auth, page, /^Allow Hosted Connector \(127\.0\.0\.1:\d+\) to use your machines and event webhooks through MCP\?$/);
    assert.ok(auth.information?.client_id && !auth.information.client_id.startsWith('https://'), 'registered dynamically');

    const tools = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(tools.includes('event_webhooks_list') && tools.includes('machines_list'), tools.join());
    const listed = await client.callTool({ name: 'event_webhooks_list', arguments: {} });
    assert.deepEqual(listed.structuredContent, { data: [], nextCursor: null });

    // An hour later the access token has expired: the SDK refreshes (the refresh token rotates) and carries on.
    const first = auth.saved!;
    live.clock.advance(3600 * 1000 + 1);
    assert.ok(await refused(first.access_token));
    await client.close();
    const again = await connect(auth);
    assert.ok(Array.isArray(dataOf(await again.callTool({ name: 'machines_list', arguments: {} }))));
    const second = auth.saved!;
    assert.notEqual(second.access_token, first.access_token);
    assert.notEqual(second.refresh_token, first.refresh_token, 'rotated');

    // Someone replays the first refresh token: the whole grant is revoked.
    const replay = await tokenRequest(live, { grant_type: 'refresh_token', refresh_token: first.refresh_token!, client_id: auth.information!.client_id });
    assert.equal(replay.json().error, 'invalid_grant');
    assert.ok(await refused(second.access_token), 'the current access token is refused too');
    await again.close();
    await context.close();
    assert.deepEqual(problems, []);

    await settled(live);
    assert.ok(live.smtp.to(user.email).some((mail) => mail.subject === 'A new application was connected to your account'));
  });

  test('a Client ID Metadata Document instead of registration; revoked from the dashboard, the next call is refused at once', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    const problems = watchConsole(page);
    const metadataUrl = `https://127.0.0.1:${metadataHost.port}/oauth/client.json`;
    const auth = new ConnectorAuth(callbackUrl, metadataUrl);
    const client = await signInFlow(auth, page, /^Allow Metadata Connector \(127\.0\.0\.1:\d+\)/);
    assert.equal(auth.information?.client_id, metadataUrl, 'the URL is the client id');
    assert.ok(metadataHost.requests.some((request) => request.path === '/oauth/client.json'), 'the document was fetched');
    assert.ok(Array.isArray(dataOf(await client.callTool({ name: 'event_webhooks_list', arguments: {} }))));

    await page.goto(`${live.baseUrl}/account/applications`);
    const row = page.locator('tr', { hasText: 'Metadata Connector' });
    await row.getByRole('button', { name: 'Revoke Metadata Connector' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke access' }).click();
    await row.waitFor({ state: 'detached' });
    assert.ok(await refused(auth.saved!.access_token), 'refused at once');
    await client.close();
    await context.close();
    assert.deepEqual(problems, []);
  });
});
