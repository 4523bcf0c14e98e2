import { strict as assert } from 'node:assert';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createTestApp, type TestContext } from '../support/app.ts';
import { assertRawProblem, exchange, type RawResponse } from '../support/raw-http.ts';

describe('answers written before a request exists are problem+json too', () => {
  let ctx: TestContext;
  let port: number;
  before(async () => {
    ctx = await createTestApp();
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (ctx.app.server.address() as { port: number }).port;
  });
  after(() => ctx.close());

  test('malformed HTTP is 400 invalid_request', async () => {
    // Regression: Fastify's default clientErrorHandler answered {"error":"Bad Request",...} as application/json.
    assertRawProblem(await exchange(port, 'GET / HTTP/1.1\r\nHost: localhost\r\nNot a header line\r\n\r\n'), 400, 'invalid_request');
    assertRawProblem(await exchange(port, 'NONSENSE\r\n\r\n'), 400, 'invalid_request');
  });

  test('headers over the size limit are 431 headers_too_large', async () => {
    const response = await exchange(port, `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assertRawProblem(response, 431, 'headers_too_large');
  });

  test('an HTTP/1.1 request without Host is 400 invalid_request', async () => {
    // Regression: Node's server answered it itself, a 400 with an empty body.
    const response = await exchange(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    assertRawProblem(response, 400, 'invalid_request');
    assert.match(JSON.parse(response.body).detail, /no Host header/);
  });

  test('an Expect other than 100-continue is 417 expectation_failed; 100-continue is met', async () => {
    // Regression: Node's server answered 417 itself, with an empty body.
    for (const expectation of ['foo', '200-ok', 'continue']) {
      const response = await exchange(port, `POST /api/auth/forgot HTTP/1.1\r\nHost: localhost\r\nExpect: ${expectation}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      assertRawProblem(response, 417, 'expectation_failed');
    }
    const continued = await exchange(port, 'POST /api/auth/forgot HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 29\r\nConnection: close\r\n\r\n{"email":"a@example.com"}    ');
    assert.match(continued.raw, /^HTTP\/1.1 100 Continue\r\n\r\nHTTP\/1.1 200 OK\r\n/);
  });

  test('a request that asks to upgrade where nothing upgrades is answered, and the connection closes', { timeout: 10_000 }, async () => {
    // Regression: @fastify/websocket routes such requests on a socket Node's server has let go of; the answer came
    // and the connection stayed open, holding the client and a graceful stop (the fuzz test found it).
    const upgrade = 'Connection: upgrade\r\nUpgrade: websocket\r\n';
    assertRawProblem(await exchange(port, `GET /api/me HTTP/1.1\r\nHost: localhost\r\n${upgrade}\r\n`), 401, 'unauthenticated');
    assertRawProblem(await exchange(port, `OPTIONS http://[::1/x HTTP/1.1\r\nHost: localhost\r\n${upgrade}\r\n`), 400, 'invalid_request');
    // Regression: a route registered after @fastify/websocket took any upgrade request as a WebSocket handshake, and
    // an unknown path's 404 came as ws's text/html "Missing or invalid Sec-WebSocket-Key header" (the fuzz test).
    assertRawProblem(await exchange(port, `GET /api/nothing-here HTTP/1.1\r\nHost: localhost\r\n${upgrade}\r\n`), 404, 'not_found');
    const healthy = await exchange(port, `GET /healthz HTTP/1.1\r\nHost: localhost\r\n${upgrade}\r\n`);
    assert.equal(healthy.status, 200);
    assert.equal(healthy.headers.connection, 'close');
  });

  test('CONNECT is 400 invalid_request', async () => {
    // Regression: with nobody listening for CONNECT, Node dropped the connection without an answer.
    const response = await exchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assertRawProblem(response, 400, 'invalid_request');
    assert.match(JSON.parse(response.body).detail, /not a proxy/);
  });
});

describe('during shutdown', () => {
  test('a request that arrives while the server drains is 503 service_unavailable as problem+json, with Retry-After', async () => {
    // Regression: Fastify's return503OnClosing answered with its own application/json body.
    let reachedPreClose!: () => void;
    const draining = new Promise<void>((resolve) => (reachedPreClose = resolve));
    let finishDraining!: () => void;
    const drained = new Promise<void>((resolve) => (finishDraining = resolve));
    const ctx = await createTestApp({
      // Holds the shutdown at the moment new requests must be refused but the server still accepts connections.
      setup: (app) => {
        app.addHook('preClose', async () => {
          reachedPreClose();
          await drained;
        });
      },
    });
    try {
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      const port = (ctx.app.server.address() as { port: number }).port;
      const closed = ctx.app.close();
      await draining;
      const response = await new Promise<RawResponse>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/api/me', agent: false }, (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body, raw: body }));
        });
        req.on('error', reject);
        req.end();
      });
      assertRawProblem(response, 503, 'service_unavailable');
      assert.match(response.headers['retry-after'] ?? '', /^\d+$/);
      assert.equal(response.headers.connection, 'close');
      finishDraining();
      await closed;
    } finally {
      finishDraining();
      await ctx.smtp.close();
      await ctx.database.drop();
    }
  });
});
