import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { comesFromOwnOrigin, type OriginHeaders } from '../../src/http/origin.ts';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';

const OWN = 'https://platform.example.com';

// [method, Sec-Fetch-Site, Origin, allowed]
const TABLE: Array<[string, string | undefined, string | undefined, boolean]> = [
  // The browser says where the request comes from.
  ['POST', 'same-origin', OWN, true],
  ['POST', 'same-origin', undefined, true],
  ['GET', 'same-origin', undefined, true],
  ['GET', 'none', undefined, true],
  ['POST', 'cross-site', undefined, false],
  ['POST', 'cross-site', OWN, false],
  ['GET', 'cross-site', undefined, false],
  ['POST', 'same-site', undefined, false],
  ['GET', 'same-site', OWN, false],
  // Origin alone (older browsers).
  ['POST', undefined, OWN, true],
  ['DELETE', undefined, OWN, true],
  ['POST', undefined, 'https://evil.example', false],
  ['GET', undefined, 'https://evil.example', false],
  ['POST', undefined, 'http://platform.example.com', false],
  ['POST', undefined, 'https://platform.example.com:8443', false],
  ['POST', undefined, 'https://sub.platform.example.com', false],
  ['POST', undefined, 'null', false],
  ['POST', 'same-origin', 'https://evil.example', false],
  // Neither header: safe methods pass, unsafe ones do not.
  ['GET', undefined, undefined, true],
  ['HEAD', undefined, undefined, true],
  ['OPTIONS', undefined, undefined, true],
  ['POST', undefined, undefined, false],
  ['PUT', undefined, undefined, false],
  ['PATCH', undefined, undefined, false],
  ['DELETE', undefined, undefined, false],
];

test('comesFromOwnOrigin truth table (CONTRACT 4)', () => {
  for (const [method, fetchSite, origin, allowed] of TABLE) {
    const headers: OriginHeaders = {};
    if (fetchSite !== undefined) headers['sec-fetch-site'] = fetchSite;
    if (origin !== undefined) headers.origin = origin;
    assert.equal(comesFromOwnOrigin(method, headers, OWN), allowed, `${method} Sec-Fetch-Site=${fetchSite} Origin=${origin}`);
  }
});

describe('the origin rule follows the matched route, not the raw URL', () => {
  let ctx: TestContext;
  let user: TestUser;
  before(async () => {
    ctx = await createTestApp();
    user = await registerUser(ctx);
  });
  after(() => ctx.close());

  const keyCount = async () => (await ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asSession(user.session) })).json().data.length;
  const cookie = () => ({ cookie: `session=${user.session}` });
  const evil = { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' };

  test('a cross-site POST to /%61pi/keys with the cookie is 403 cross_site and creates no key', async () => {
    // Regression: the rule applied only when request.url started with "/api/", but the router decodes the path.
    const before = await keyCount();
    const response = await ctx.app.inject({ method: 'POST', url: '/%61pi/keys', headers: { ...cookie(), ...evil }, payload: { name: 'csrf' } });
    assertProblem(response, 403, 'cross_site');
    assert.equal(await keyCount(), before);
  });

  test('a same-site POST to /%61pi/auth/logout with the cookie is 403 and the session lives on', async () => {
    // Regression: this signed the user out from a sibling subdomain.
    const response = await ctx.app.inject({ method: 'POST', url: '/%61pi/auth/logout', headers: { ...cookie(), 'sec-fetch-site': 'same-site' } });
    assertProblem(response, 403, 'cross_site');
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(user.session) })).statusCode, 200);
  });

  test('no encoding of an API path lets a cross-site cookie request through', async () => {
    const before = await keyCount();
    const paths = ['/%61pi/keys', '/%61%70%69/keys', '/ap%69/keys', '/api/%6beys', '/%61pi/%6Beys', '/%2561pi/keys', '/api%2Fkeys', '//api/keys', '/API/keys', '/api/keys/', '/api/./keys'];
    for (const url of paths) {
      for (const headers of [{ ...cookie(), ...evil }, { ...cookie(), 'sec-fetch-site': 'same-site' }, cookie()]) {
        const response = await ctx.app.inject({ method: 'POST', url, headers, payload: { name: 'csrf' } });
        assert.ok([403, 404].includes(response.statusCode), `POST ${url} ${JSON.stringify(headers)}: ${response.statusCode} ${response.body}`);
      }
      const read = await ctx.app.inject({ method: 'GET', url, headers: { ...cookie(), ...evil } });
      assert.ok([403, 404].includes(read.statusCode), `GET ${url}: ${read.statusCode}`);
      assert.notEqual(read.statusCode, 200);
    }
    assertProblem(await ctx.app.inject({ method: 'GET', url: '/%61pi/me', headers: { ...cookie(), ...evil } }), 403, 'cross_site');
    assertProblem(await ctx.app.inject({ method: 'DELETE', url: '/%61pi/me/sessions/ses_01jz0000000000000000000000', headers: { ...cookie(), ...evil } }), 403, 'cross_site');
    assert.equal(await keyCount(), before);
  });

  test('a page opened from a link on another site still loads with the cookie (a GET outside the API)', async () => {
    for (const url of ['/', '/account', '/%61ccount', '/docs/errors']) {
      const response = await ctx.app.inject({ method: 'GET', url, headers: { ...cookie(), ...evil, accept: 'text/html' } });
      assert.equal(response.statusCode, 200, `GET ${url}: ${response.statusCode}`);
    }
    // An unsafe method is checked wherever it goes.
    assertProblem(await ctx.app.inject({ method: 'POST', url: '/account', headers: { ...cookie(), ...evil } }), 403, 'cross_site');
  });
});
