import { strict as assert } from 'node:assert';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createTestApp, PUBLIC_URL, type TestContext } from '../support/app.ts';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes bytes to the server as they are and reads the answer until the server closes the connection. */
function exchange(port: number, bytes: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', ...rest] = received.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(bytes);
  });
}

function assertRawProblem(response: RawResponse, status: number, code: string): void {
  assert.equal(response.status, status, `${response.status} ${response.body}`);
  assert.match(response.headers['content-type'] ?? '', /^application\/problem\+json/);
  const body = JSON.parse(response.body);
  assert.deepEqual(Object.keys(body).sort(), ['code', 'detail', 'status', 'title', 'type']);
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.type, `${PUBLIC_URL}/docs/errors#${code}`);
}

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
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body }));
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
