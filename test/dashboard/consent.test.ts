import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { mcpCall, pkcePair, tokenRequest } from '../support/oauth.ts';

describe('dashboard in Chromium: the OAuth consent page and connected applications', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  let callbackServer: Server;
  let callbackUrl: string;

  before(async () => {
    ui = await openSignedInPage({ user: { name: 'Katherine Johnson' } });
    ({ live, user, page, problems } = ui);
    callbackServer = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/plain' }).end('Back at the connector.'));
    await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
  });
  after(async () => {
    callbackServer?.close();
    await ui?.close();
  });

  async function registerClient(name: string): Promise<string> {
    const response = await live.app.inject({ method: 'POST', url: '/oauth/register', payload: { client_name: name, redirect_uris: [callbackUrl], token_endpoint_auth_method: 'none' } });
    assert.equal(response.statusCode, 201, response.body);
    return response.json().client_id;
  }

  /** The browser goes to the authorization endpoint, as the client sends it; returns the PKCE verifier. */
  async function authorize(clientId: string): Promise<string> {
    const { verifier, challenge } = pkcePair();
    const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: callbackUrl, code_challenge: challenge, code_challenge_method: 'S256', scope: 'mcp', state: 'xyz' });
    await page.goto(`${live.baseUrl}/oauth/authorize?${query}`);
    await page.getByRole('heading', { name: 'Connect an application' }).waitFor();
    return verifier;
  }

  test('names the client and its redirect host; Deny by keyboard sends access_denied back', async () => {
    const clientId = await registerClient('Keyboard Client');
    await authorize(clientId);
    const host = new URL(callbackUrl).host;
    assert.equal(await page.locator('#consent-question').innerText(), `Allow Keyboard Client (${host}) to use your machines and event webhooks through MCP?`);
    assert.match(await page.getByText('Signed in as').innerText(), new RegExp(user.email.replace(/[.+]/g, '\\$&')));
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Allow', 'Allow has the focus');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Deny');
    await page.keyboard.press('Enter');
    await page.waitForURL((url) => url.toString().startsWith(callbackUrl));
    const back = new URL(page.url());
    assert.equal(back.searchParams.get('error'), 'access_denied');
    assert.equal(back.searchParams.get('state'), 'xyz');
    assert.equal(back.searchParams.get('code'), null);
  });

  test('an unknown or already answered request says so', async () => {
    await page.goto(`${live.baseUrl}/oauth/consent?uid=no-such-request`);
    await page.getByRole('heading', { name: 'This request cannot be answered' }).waitFor();
    await page.getByText('expired or was already answered').waitFor();
  });

  test('Allow connects it: listed under Account with created and last used, revoked from there', async () => {
    const clientId = await registerClient('Listed Client');
    const verifier = await authorize(clientId);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL((url) => url.toString().startsWith(callbackUrl));
    const code = new URL(page.url()).searchParams.get('code')!;
    const tokens = (await tokenRequest(live, { grant_type: 'authorization_code', code, redirect_uri: callbackUrl, client_id: clientId, code_verifier: verifier })).json();

    await page.goto(`${live.baseUrl}/account/applications`);
    const row = page.locator('tr', { hasText: 'Listed Client' });
    await row.waitFor();
    assert.match(await row.innerText(), new RegExp(new URL(callbackUrl).host));
    assert.match(await row.innerText(), /Never/, 'not used yet');

    assert.equal((await mcpCall(live, tokens.access_token, 'tools/list')).statusCode, 200);
    await page.reload();
    await row.waitFor();
    assert.doesNotMatch(await row.innerText(), /Never/, 'last used now shows');

    await row.getByRole('button', { name: 'Revoke Listed Client' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke application?' });
    await dialog.getByRole('button', { name: 'Revoke access' }).click();
    await row.waitFor({ state: 'detached' });
    await page.getByText('No connected applications').waitFor();
    assert.equal((await mcpCall(live, tokens.access_token, 'tools/list')).statusCode, 401, 'its token fails at once');
    assert.deepEqual(problems, []);
  });
});
