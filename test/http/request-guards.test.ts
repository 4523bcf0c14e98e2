import { strict as assert } from 'node:assert';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { asBearer, createTestApp, type TestContext } from '../support/app.ts';
import { createMachine, machineSuite, newOwner, type Owner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { assertRawProblem, exchange } from '../support/raw-http.ts';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'guards-test', version: '1.0.0' } },
});
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/**
 * Host headers no URL can be built from: blank, with a path, credentials, query or fragment, broken literals, ports
 * out of range. (An empty one is sent over the wire below: inject() puts its default host in its place.)
 */
const UNUSABLE_HOSTS = [' ', 'a b', 'a/b', 'evil@localhost', 'a?b', 'a#b', 'a\\b', '[::1', '[nope]', 'localhost:99999', 'localhost:abc', 'localhost:', ':3000', '1.2.3.4.5', '999.1.1.1', 'ex%61mple.com', 'a<b', 'a|b', 'exa\u00a0mple.com'];
const USABLE_HOSTS = ['localhost', 'localhost:3000', '127.0.0.1', '127.0.0.1:80', '[::1]', '[::1]:3000', 'example.com.', 'api.example.com:443', 'xn--bcher-kva.example'];

describe('requests the service cannot build a URL from are 400 before any handler runs', () => {
  const suite = machineSuite();
  let mcpPaths: string[];
  let port: number;
  before(async () => {
    mcpPaths = ['/api/mcp', `/api/machines/${(await createMachine(suite.owner)).id}/mcp`];
    await suite.ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (suite.ctx.app.server.address() as { port: number }).port;
  });

  test('an empty or malformed Host on the MCP endpoints and elsewhere is 400 invalid_request', async () => {
    // Regression: an empty Host reached the MCP handlers, whose URL could not be built: a 500.
    for (const host of UNUSABLE_HOSTS) {
      for (const url of [...mcpPaths, '/api/me', '/healthz', '/nowhere']) {
        const response = await suite.ctx.app.inject({
          method: url.endsWith('/mcp') ? 'POST' : 'GET',
          url,
          headers: { ...MCP_HEADERS, ...asBearer(suite.owner.key), host },
          ...(url.endsWith('/mcp') ? { payload: INITIALIZE } : {}),
        });
        assertProblem(response, 400, 'invalid_request');
        assert.match(response.json().detail, /Host header/, `${url} with Host ${JSON.stringify(host)}`);
      }
    }
  });

  test('well-formed hosts are served', async () => {
    for (const host of USABLE_HOSTS) {
      const response = await suite.ctx.app.inject({ method: 'POST', url: mcpPaths[0]!, headers: { ...MCP_HEADERS, ...asBearer(suite.owner.key), host }, payload: INITIALIZE });
      assert.equal(response.statusCode, 200, `Host ${host}: ${response.body}`);
    }
  });

  test('over the wire: an empty Host, two Host headers, and a target that is no URL', async () => {
    const mcp = (head: string) => `POST ${mcpPaths[0]} HTTP/1.1\r\n${head}Authorization: Bearer ${suite.owner.key}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${INITIALIZE.length}\r\nConnection: close\r\n\r\n${INITIALIZE}`;
    assertRawProblem(await exchange(port, mcp('Host:\r\n')), 400, 'invalid_request');
    assertRawProblem(await exchange(port, mcp('Host: localhost\r\nHost: evil.example\r\n')), 400, 'invalid_request');
    assertRawProblem(await exchange(port, 'GET //[::1/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'), 400, 'invalid_request');
    assertRawProblem(await exchange(port, 'GET http://[::1/api/me HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'), 400, 'invalid_request');
  });

  test('an HTTP/1.0 request without Host (a health checker) is taken as addressed to our own host', async () => {
    const health = await exchange(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    assert.equal(health.status, 200, health.raw);
    const response = await exchange(port, `POST ${mcpPaths[0]} HTTP/1.0\r\nAuthorization: Bearer ${suite.owner.key}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${INITIALIZE.length}\r\n\r\n${INITIALIZE}`);
    assert.equal(response.status, 200, response.raw);
    assert.equal(JSON.parse(response.body).result.serverInfo.version, '1.0.0');
  });
});

describe('behind a trusted proxy, its X-Forwarded-Host and X-Forwarded-Proto must make a URL too', () => {
  let ctx: TestContext;
  let owner: Owner;
  before(async () => {
    ctx = await createTestApp({ env: { TRUST_PROXY: 'on' } });
    owner = await newOwner(ctx);
  });
  after(() => ctx.close());

  test('a malformed X-Forwarded-Host or a scheme other than http(s) is 400 invalid_request', async () => {
    // Regression: the MCP handler built its URL from them: a 500.
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ 'x-forwarded-host': 'a b' }, /Host header/],
      [{ 'x-forwarded-host': 'x, a/b' }, /Host header/],
      [{ 'x-forwarded-proto': 'a b' }, /X-Forwarded-Proto/],
      [{ 'x-forwarded-proto': 'javascript' }, /X-Forwarded-Proto/],
    ];
    for (const [headers, detail] of cases) {
      const response = await ctx.app.inject({ method: 'POST', url: '/api/mcp', headers: { ...MCP_HEADERS, ...asBearer(owner.key), ...headers }, payload: INITIALIZE });
      assertProblem(response, 400, 'invalid_request');
      assert.match(response.json().detail, detail, JSON.stringify(headers));
    }
    const fine = await ctx.app.inject({ method: 'POST', url: '/api/mcp', headers: { ...MCP_HEADERS, ...asBearer(owner.key), 'x-forwarded-host': 'api.example.com', 'x-forwarded-proto': 'https' }, payload: INITIALIZE });
    assert.equal(fine.statusCode, 200, fine.body);
  });
});

describe('a body in a coding the service does not decode is 415, never read as if it were plain', () => {
  let ctx: TestContext;
  let port: number;
  before(async () => {
    ctx = await createTestApp({ env: { RATE_LIMIT: 'off' } });
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (ctx.app.server.address() as { port: number }).port;
  });
  after(() => ctx.close());

  const register = (email: string) => JSON.stringify({ email, password: 'correct horse battery', name: 'Coded' });

  test('Content-Encoding other than identity: 415 unsupported_media_type with Accept-Encoding, and nothing is created', async () => {
    // Regression: a body labelled gzip (or anything) was parsed as plain JSON and acted on.
    for (const [index, coding] of ['gzip', 'br', 'deflate', 'zstd', 'x-custom', 'gzip, identity', 'identity, gzip'].entries()) {
      const email = `coded${index}@example.com`;
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/register',
        headers: { origin: ctx.config.publicUrl, 'content-type': 'application/json', 'content-encoding': coding },
        payload: register(email),
      });
      assertProblem(response, 415, 'unsupported_media_type');
      assert.equal(response.headers['accept-encoding'], 'identity');
      const login = await ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: ctx.config.publicUrl }, payload: { email, password: 'correct horse battery' } });
      assert.equal(login.statusCode, 401, `no account was created for ${coding}`);
    }
    const compressed = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      headers: { origin: ctx.config.publicUrl, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: gzipSync(register('zipped@example.com')),
    });
    assertProblem(compressed, 415, 'unsupported_media_type');
    const identity = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      headers: { origin: ctx.config.publicUrl, 'content-type': 'application/json', 'content-encoding': 'Identity' },
      payload: register('plain@example.com'),
    });
    assert.equal(identity.statusCode, 201, identity.body);
  });

  test('the same on a raw-body route (inbound webhooks), before the signature is looked at', async () => {
    const response = await ctx.app.inject({ method: 'POST', url: '/api/hooks/sometoken', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload: '{}' });
    assertProblem(response, 415, 'unsupported_media_type');
  });

  test('JSON in a charset other than UTF-8 is 415 too, rather than read as UTF-8', async () => {
    // Regression: `application/json; charset=latin1` (or utf-16) was decoded as UTF-8 and acted on.
    for (const [index, charset] of ['latin1', 'iso-8859-1', 'utf-16', 'UTF-16LE', '"windows-1252"'].entries()) {
      const email = `charset${index}@example.com`;
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/register',
        headers: { origin: ctx.config.publicUrl, 'content-type': `application/json; charset=${charset}` },
        payload: register(email),
      });
      assertProblem(response, 415, 'unsupported_media_type');
      const login = await ctx.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: ctx.config.publicUrl }, payload: { email, password: 'correct horse battery' } });
      assert.equal(login.statusCode, 401, `no account was created for charset ${charset}`);
    }
    for (const [index, contentType] of ['application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'application/json; charset=utf-8; x=y'].entries()) {
      const response = await ctx.app.inject({ method: 'POST', url: '/api/auth/register', headers: { origin: ctx.config.publicUrl, 'content-type': contentType }, payload: register(`utf8-${index}@example.com`) });
      assert.equal(response.statusCode, 201, `${contentType}: ${response.body}`);
    }
  });

  test('a Transfer-Encoding other than chunked (which Node decodes) is 415 too', async () => {
    const body = register('transfer@example.com');
    const response = await exchange(port, `POST /api/auth/register HTTP/1.1\r\nHost: localhost\r\nOrigin: ${ctx.config.publicUrl}\r\nContent-Type: application/json\r\n` +
      `Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    assertRawProblem(response, 415, 'unsupported_media_type');
  });
});
