import { strict as assert } from 'node:assert';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PAGE_PATHS } from '../../src/dashboard/dashboard.routes.ts';
import { PUBLIC_DIR } from '../../src/dashboard/assets.ts';
import { PROBLEM_TITLES } from '../../src/http/errors.ts';
import { createTestApp, PUBLIC_URL, registerUser, settled, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';

const concretePaths = PAGE_PATHS.map((path) => path.replace(':id', 'ep_01jd0000000000000000000000'));

const SOURCE_DIR = fileURLToPath(new URL('../../src/', import.meta.url));
const CODE = `'([a-z][a-z0-9]*(?:_[a-z0-9]+)*)'`;

/**
 * Every error code the service can answer with, and the statuses it comes
 * with, read from the source: `new AppError(409, 'pool_empty', …)`,
 * `send(reply, 503, 'service_unavailable', …)`, `[431, 'headers_too_large', …]`,
 * `{ 404: 'not_found' }`, and the calls of factories that take the code as
 * their first argument (`conflict('limit_reached', …)`). An AppError built
 * with a code that is not a literal anywhere else is reported, so no code can
 * hide from this scan.
 */
async function codesInSource(): Promise<{ codes: Map<string, Set<number>>; hidden: string[] }> {
  const names = (await readdir(SOURCE_DIR, { recursive: true })).filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'));
  const sources = await Promise.all(names.map(async (name) => [name, await readFile(join(SOURCE_DIR, name), 'utf8')] as const));
  const codes = new Map<string, Set<number>>();
  const add = (code: string, status: number) => codes.set(code, (codes.get(code) ?? new Set()).add(status));
  const factories = new Map<string, number>();
  const hidden: string[] = [];
  for (const [name, source] of sources) {
    for (const [, status, code] of source.matchAll(new RegExp(`\\b([45]\\d\\d)\\s*[,:]\\s*${CODE}`, 'g'))) add(code!, Number(status));
    for (const [, factory, parameter, status] of source.matchAll(/export const (\w+) = \((\w+): string[^)]*\) =>\s*new AppError\(\s*(\d{3}),\s*(\w+)/g)) {
      if (parameter !== undefined) factories.set(factory!, Number(status));
    }
    for (const match of source.matchAll(/new AppError\(\s*[^,]+,\s*([^,\s]+)\s*,/g)) {
      const isFactory = [...factories.keys()].some((factory) => new RegExp(`export const ${factory} = \\(${match[1]}: string`).test(source));
      if (!match[1]!.startsWith("'") && !isFactory) hidden.push(`${name}: ${match[0]}`);
    }
  }
  for (const [, source] of sources) {
    for (const [factory, status] of factories) {
      for (const [, code] of source.matchAll(new RegExp(`\\b${factory}\\(\\s*${CODE}`, 'g'))) add(code!, status);
    }
  }
  return { codes, hidden };
}

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
      assert.doesNotMatch(csp, /unsafe-eval/, path);
      // Only styles may be inline (xterm.js writes its own: src/dashboard/security-headers.ts); never a script.
      assert.deepEqual(csp.split('; ').filter((directive) => directive.includes('unsafe-inline')), ["style-src-elem 'self' 'unsafe-inline'", "style-src-attr 'unsafe-inline'"], path);
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

  test('/docs/errors describes every error code the service can answer with, as found in the source', async () => {
    const { codes, hidden } = await codesInSource();
    assert.deepEqual(hidden, [], 'every AppError names its code as a literal, or through a factory this scan follows');
    for (const known of ['invalid_request', 'not_found', 'limit_reached', 'invalid_state', 'pool_empty', 'invalid_signature', 'internal_error', 'service_unavailable']) {
      assert.ok(codes.has(known), `the scan finds ${known}: it still reads the source correctly`);
    }
    const { body } = await get('/docs/errors');
    for (const [code, statuses] of codes) {
      const section = new RegExp(`<section class="card error-doc" id="${code}"[\\s\\S]*?</section>`).exec(body)?.[0];
      assert.ok(section, `/docs/errors has a section for ${code} (add it to ERROR_DOCS in src/dashboard/error-docs.ts)`);
      const status = Number(/>HTTP (\d{3})</.exec(section)?.[1]);
      assert.ok(statuses.has(status), `${code} is documented as HTTP ${status}; the source answers it with ${[...statuses].join(', ')}`);
      const description = /<\/p>\s*<p>([^<]{20,})/.exec(section)?.[1];
      assert.ok(description, `${code} has a description`);
      assert.match(section, /<strong>What to do:<\/strong> \S/, `${code} says what to do`);
    }
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
