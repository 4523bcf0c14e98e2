import { strict as assert } from 'node:assert';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PAGE_PATHS } from '../../src/dashboard/dashboard.routes.ts';
import { PUBLIC_DIR } from '../../src/dashboard/assets.ts';
import { PROBLEM_TITLES } from '../../src/http/errors.ts';
import { createTestApp, PUBLIC_URL, registerUser, settled, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';

const concretePaths = PAGE_PATHS.map((path) => path.replace(':id', 'ep_01jd0000000000000000000000'));

describe('dashboard pages (served by the service)', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const get = (url: string, headers: Record<string, string> = {}) => ctx.app.inject({ method: 'GET', url, headers });

  test('every page path loads directly with the HTML shell and the security headers', async () => {
    for (const path of concretePaths) {
      const response = await get(path);
      assert.equal(response.statusCode, 200, path);
      assert.equal(response.headers['content-type'], 'text/html; charset=utf-8', path);
      assert.match(response.body, /<script type="module" src="\/assets\/js\/main\.js"><\/script>/, path);
      const csp = String(response.headers['content-security-policy']);
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.match(csp, /default-src 'none'/, path);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
      assert.equal(response.headers['x-content-type-options'], 'nosniff', path);
      assert.equal(response.headers['referrer-policy'], 'no-referrer', path);
      assert.equal(response.headers['x-frame-options'], 'DENY', path);
      assert.equal(response.headers['cache-control'], 'no-store', path);
    }
  });

  test('a page opened from another site with the session cookie is served: the origin rule is for /api/ only', async () => {
    const user = await registerUser(ctx);
    const response = await get('/verify-email?token=abc', { cookie: `session=${user.session}`, 'sec-fetch-site': 'cross-site', origin: 'https://webmail.example' });
    assert.equal(response.statusCode, 200);
    const api = await get('/api/me', { cookie: `session=${user.session}`, 'sec-fetch-site': 'cross-site' });
    assert.equal(api.statusCode, 403, 'while the API itself still refuses it');
    assert.equal(api.json().code, 'cross_site');
  });

  test('opening the emailed links consumes nothing: only the POST from the page does', async () => {
    const user = await registerUser(ctx);
    await settled(ctx);
    const verify = linkIn(ctx.smtp.to(user.email).at(-1)!, '/verify-email');
    for (let i = 0; i < 3; i++) assert.equal((await get(new URL(verify.url).pathname + new URL(verify.url).search)).statusCode, 200);
    const confirmed = await ctx.app.inject({ method: 'POST', url: '/api/auth/verify', headers: { origin: PUBLIC_URL }, payload: { token: verify.token } });
    assert.equal(confirmed.statusCode, 200, 'the token still works after the page was opened three times');

    await ctx.app.inject({ method: 'POST', url: '/api/auth/forgot', headers: { origin: PUBLIC_URL }, payload: { email: user.email } });
    await settled(ctx);
    const reset = linkIn(ctx.smtp.to(user.email).at(-1)!, '/reset-password');
    assert.equal((await get(`/reset-password?token=${reset.token}`)).statusCode, 200);
    const changed = await ctx.app.inject({ method: 'POST', url: '/api/auth/reset', headers: { origin: PUBLIC_URL }, payload: { token: reset.token, password: 'a brand new password' } });
    assert.equal(changed.statusCode, 200);
  });

  test('the shell carries no inline script, style or event handler (the CSP would block them)', async () => {
    const { body } = await get('/sign-in');
    assert.doesNotMatch(body, /<script(?![^>]*\ssrc=)[^>]*>/);
    assert.doesNotMatch(body, /\sstyle=/);
    assert.doesNotMatch(body, /\son[a-z]+=/);
    assert.doesNotMatch(body, /<style/);
  });

  test('the scripts build the DOM without HTML strings or eval', async () => {
    const files = (await readdir(join(PUBLIC_DIR, 'js'), { recursive: true })).filter((name) => name.endsWith('.js'));
    assert.ok(files.length > 10);
    for (const name of files) {
      const source = await readFile(join(PUBLIC_DIR, 'js', name), 'utf8');
      assert.doesNotMatch(source, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|localStorage|sessionStorage/, name);
    }
  });

  test('the client-side router knows exactly the paths the server serves', async () => {
    const source = await readFile(join(PUBLIC_DIR, 'js', 'routes.js'), 'utf8');
    const clientPaths = [...source.matchAll(/\{ path: '([^']+)'/g)].map((match) => match[1]);
    assert.deepEqual([...clientPaths].sort(), [...PAGE_PATHS].sort());
  });

  test('assets are served with their type, an ETag and 304 on revalidation; nothing outside the folder', async () => {
    const css = await get('/assets/app.css');
    assert.equal(css.statusCode, 200);
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
    assert.equal(css.headers['x-content-type-options'], 'nosniff');
    const script = await get('/assets/js/main.js');
    assert.equal(script.headers['content-type'], 'text/javascript; charset=utf-8');
    const etag = String(script.headers.etag);
    const again = await get('/assets/js/main.js', { 'if-none-match': etag });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, '');
    for (const path of ['/assets/../../package.json', '/assets/%2e%2e/%2e%2e/package.json', '/assets/tsconfig.json', '/assets/nope.js']) {
      const response = await get(path);
      assert.equal(response.statusCode, 404, path);
      assert.doesNotMatch(response.body, /"name": "machine-platform-service"|compilerOptions/, path);
    }
  });

  test('an unknown page is the dashboard’s 404 for people, problem+json for the API and other clients', async () => {
    const page = await get('/no-such-page', { accept: 'text/html,application/xhtml+xml' });
    assert.equal(page.statusCode, 404);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    const client = await get('/no-such-page');
    assert.equal(client.statusCode, 404);
    assert.equal(client.json().code, 'not_found');
    const api = await get('/api/no-such-thing', { accept: 'text/html' });
    assert.equal(api.statusCode, 404);
    assert.equal(api.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.deepEqual(api.json(), {
      type: `${PUBLIC_URL}/docs/errors#not_found`, title: 'Not found', status: 404, detail: 'No route GET /api/no-such-thing.', code: 'not_found',
    });
  });

  test('/docs/errors documents every error code at the anchor its problem type points to', async () => {
    const response = await get('/docs/errors');
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(String(response.headers['content-security-policy']), /frame-ancestors 'none'/);
    assert.doesNotMatch(response.body, /<script/);
    for (const [code, title] of Object.entries(PROBLEM_TITLES)) {
      assert.match(response.body, new RegExp(`<section class="card error-doc" id="${code}"`), code);
      assert.ok(response.body.includes(`>${title}</a> <code>${code}</code>`), `${code} has its title`);
    }
    const problem = (await ctx.app.inject({ method: 'GET', url: '/api/me' })).json();
    const anchor = new URL(problem.type);
    assert.equal(anchor.origin + anchor.pathname, `${PUBLIC_URL}/docs/errors`);
    assert.match(response.body, new RegExp(`id="${anchor.hash.slice(1)}"`));
  });
});
