import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext } from 'playwright-core';
import { asSession, registerUser, type TestUser } from '../support/app.ts';
import { freePort, launchBrowser, newContext, startLiveApp, useSession, type LiveApp } from '../support/browser.ts';

interface Seen {
  method: string;
  url: string;
  status: number;
  code: string | null;
  withCookie: boolean;
  fetchSite: string | undefined;
}

/** A page on another origin that tries to use the signed-in user's cookie against the API. */
function attackerPage(target: string): string {
  return `<!doctype html><html><body>
<form id="post-key" method="POST" action="${target}/api/keys" enctype="text/plain"><input name='{"name":"from-a-form","x":"' value='"}'></form>
<form id="logout" method="POST" action="${target}/api/auth/logout"></form>
<form id="read-keys" method="GET" action="${target}/api/keys"></form>
<script>
window.sendFetch = () => fetch(${JSON.stringify(target)} + '/api/keys', {
  method: 'POST', mode: 'no-cors', credentials: 'include',
  headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ name: 'from-a-fetch' }),
}).then(() => 'sent', (error) => 'blocked: ' + error.message);
</script></body></html>`;
}

describe('dashboard in Chromium: another origin cannot use the session cookie', () => {
  let live: LiveApp;
  let browser: Browser;
  let other: Server;
  let otherPort: number;
  let user: TestUser;
  let context: BrowserContext;
  const seen: Seen[] = [];

  before(async () => {
    browser = await launchBrowser();
    live = await startLiveApp({
      setup: (app) => {
        // What the server answered, as the server saw it: the browser hides opaque responses from the page.
        app.addHook('onSend', async (request, reply, payload) => {
          let code: string | null = null;
          if (typeof payload === 'string' && payload.startsWith('{')) code = (JSON.parse(payload) as { code?: string }).code ?? null;
          seen.push({ method: request.method, url: request.url, status: reply.statusCode, code, withCookie: /(^|;\s*)session=[^;]/.test(request.headers.cookie ?? ''), fetchSite: request.headers['sec-fetch-site'] as string | undefined });
          return payload;
        });
      },
    });
    otherPort = await freePort();
    other = createServer((request, response) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(attackerPage(live.baseUrl));
    });
    await new Promise<void>((resolve) => other.listen(otherPort, '127.0.0.1', resolve));
    user = await registerUser(live);
    context = await newContext(browser);
    await useSession(context, live, user.session);
  });
  after(async () => {
    await browser?.close();
    await new Promise((resolve) => other?.close(resolve));
    await live?.close();
  });

  const keyCount = async () => (await live.app.deps.db.selectFrom('api_keys').select('id').where('account_id', '=', user.id).execute()).length;
  const sessionWorks = async () => (await live.app.inject({ method: 'GET', url: '/api/me', headers: asSession(user.session, live.baseUrl) })).statusCode === 200;
  const lastSeen = (method: string, path: string) => {
    const match = seen.filter((entry) => entry.method === method && entry.url.split('?')[0] === path).at(-1);
    assert.ok(match, `the server saw ${method} ${path}`);
    return match;
  };

  for (const [label, host] of [['cross-site (localhost)', 'localhost'], ['same-site, another port (127.0.0.1)', '127.0.0.1']] as const) {
    test(`a page on ${label} is refused: form posts, fetch and top-level GET`, async () => {
      const page = await context.newPage();
      await page.goto(`http://${host}:${otherPort}/`);

      // Cross-site, SameSite=Lax keeps the cookie off POSTs; same-site it travels, and the origin rule refuses it.
      const sameSite = host === '127.0.0.1';
      const refusedPost = (entry: Seen, what: string) => {
        if (sameSite) assert.deepEqual([entry.withCookie, entry.status, entry.code], [true, 403, 'cross_site'], what);
        else assert.equal(entry.withCookie, false, `${what}: the browser sent no cookie`);
      };

      seen.length = 0;
      assert.equal(await page.evaluate('window.sendFetch()'), 'sent');
      refusedPost(lastSeen('POST', '/api/keys'), 'fetch');
      if (!sameSite) assert.equal(lastSeen('POST', '/api/keys').status, 401);

      for (const [form, path] of [['post-key', '/api/keys'], ['logout', '/api/auth/logout']] as const) {
        seen.length = 0;
        const navigation = page.waitForEvent('framenavigated');
        await page.evaluate((id) => (document.getElementById(id) as HTMLFormElement).submit(), form);
        await navigation;
        refusedPost(lastSeen('POST', path), form);
        await page.goto(`http://${host}:${otherPort}/`);
      }

      // A top-level GET carries the Lax cookie even across sites: the origin rule is what refuses it.
      seen.length = 0;
      const response = page.waitForResponse((candidate) => candidate.url().startsWith(`${live.baseUrl}/api/keys`));
      await page.evaluate(() => (document.getElementById('read-keys') as HTMLFormElement).submit());
      assert.equal((await response).status(), 403);
      await page.waitForURL((url) => url.origin === live.baseUrl);
      await page.waitForLoadState();
      const read = lastSeen('GET', '/api/keys');
      assert.deepEqual([read.withCookie, read.fetchSite, read.code], [true, sameSite ? 'same-site' : 'cross-site', 'cross_site']);
      assert.match(await page.content(), /"code":"cross_site"/);

      assert.equal(await keyCount(), 0, 'no key was created');
      assert.equal(await sessionWorks(), true, 'the session was not signed out');
      await page.close();
    });
  }

  test('the dashboard itself, on its own origin, works with the same cookie', async () => {
    const page = await context.newPage();
    await page.goto(`${live.baseUrl}/account/api-keys`);
    await page.getByRole('button', { name: 'Create API key' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('from the dashboard');
    await page.getByRole('dialog').getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByRole('textbox', { name: 'API key' }).waitFor();
    assert.equal(await keyCount(), 1);
    const created = lastSeen('POST', '/api/keys');
    assert.deepEqual([created.status, created.withCookie, created.fetchSite], [201, true, 'same-origin']);
  });
});
