import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createTestApp, type TestContext } from '../support/app.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { assertRawProblem, type RawResponse } from '../support/raw-http.ts';
import { eventually } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

const MIB = 1024 * 1024;
/** Read and dropped past an answer: were it kept, the process would grow by as much. */
const DISCARDED = 32 * MIB;

async function assertProblemResponse(response: Response, status: number, code: string, publicUrl: string): Promise<void> {
  const text = await response.text();
  assert.equal(response.status, status, text);
  assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const body = JSON.parse(text);
  assert.equal(body.code, code);
  assert.equal(body.type, `${publicUrl}/docs/errors#${code}`);
}

/** A JSON body of about `size` bytes, sent in 64 KiB pieces without a Content-Length (chunked). */
function streamedJson(size: number): ReadableStream<Uint8Array> {
  const piece = new TextEncoder().encode('a'.repeat(64 * 1024));
  let sent = 0;
  return new ReadableStream({
    start: (controller) => controller.enqueue(new TextEncoder().encode('{"email":"')),
    pull: (controller) => {
      if (sent >= size) {
        controller.enqueue(new TextEncoder().encode('"}'));
        return controller.close();
      }
      sent += piece.length;
      controller.enqueue(piece);
    },
  });
}

describe('an answer that goes out before its body has arrived: Node fetch against the real server', { timeout: 180_000 }, () => {
  let database: TestDatabase;
  let service: ServiceProcess;
  let apiKey: string;
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lingering-'));
    database = await freshDatabase(join(dir, 'service.db'));
    service = await startServiceProcess({ DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail') });
    const json = { 'content-type': 'application/json', origin: service.url };
    const registered = await fetch(`${service.url}/api/auth/register`, {
      method: 'POST', headers: json, body: JSON.stringify({ email: 'big@example.com', password: 'correct horse battery', name: 'Big' }),
    });
    assert.equal(registered.status, 201, await registered.text());
    const cookie = registered.headers.getSetCookie()[0]!.split(';')[0]!;
    const created = await fetch(`${service.url}/api/keys`, { method: 'POST', headers: { ...json, cookie }, body: JSON.stringify({ name: 'big' }) });
    apiKey = (await created.json()).key;
  });
  after(async () => {
    await service?.kill('SIGKILL');
    await database?.drop();
  });

  test('Regression (issue 27): a 2 MiB or 20 MiB body got EPIPE instead of 413; JSON, raw-body, MCP and OAuth routes all answer', async () => {
    // A client only sometimes loses the answer to the reset (more often for larger bodies): each is sent several times.
    for (let round = 0; round < 4; round++) {
      for (const size of [2 * MIB, 20 * MIB]) {
        const body = JSON.stringify({ email: 'a'.repeat(size) });
        const post = (path: string, headers: Record<string, string>, payload: BodyInit = body) =>
          fetch(`${service.url}${path}`, { method: 'POST', headers, body: payload, duplex: 'half' } as RequestInit);
        const json = { 'content-type': 'application/json' };
        await assertProblemResponse(await post('/api/auth/login', json), 413, 'payload_too_large', service.url);
        await assertProblemResponse(await post('/api/auth/login', json, streamedJson(size)), 413, 'payload_too_large', service.url);
        await assertProblemResponse(await post('/api/hooks/ihk_unknown', { 'content-type': 'application/octet-stream' }), 413, 'payload_too_large', service.url);
        await assertProblemResponse(await post('/api/mcp', { ...json, accept: 'application/json, text/event-stream', authorization: `Bearer ${apiKey}` }), 413, 'payload_too_large', service.url);
        // The authorization server reads its own bodies (56 KiB at most) and answers in OAuth's format.
        const token = await post('/oauth/token', { 'content-type': 'application/x-www-form-urlencoded' }, `grant_type=authorization_code&code=${'a'.repeat(size)}`);
        assert.equal(token.status, 400);
        assert.equal((await token.json()).error, 'invalid_request');
      }
    }
  });
});

interface Sender {
  /** The answer, once it has arrived whole. */
  answer: Promise<RawResponse>;
  /** When the server has let the connection go: the sender never stops or closes by itself. */
  cutOff: Promise<void>;
  localPort(): number;
}

/**
 * Sends the head of a request, then its body as fast as the connection takes
 * it, forever (or `bodyBytes` of it, then nothing), and never closes: a client
 * that does not listen. It reads what the server answers meanwhile.
 */
function sendWithoutEnd(port: number, head: string, bodyBytes = Infinity): Sender {
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const piece = Buffer.alloc(64 * 1024, 'a');
  let received = '';
  let sent = 0;
  let localPort = 0;
  socket.once('connect', () => (localPort = socket.localPort!));
  let resolveAnswer: (response: RawResponse) => void;
  const answer = new Promise<RawResponse>((resolve) => (resolveAnswer = resolve));
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
    const headEnd = received.indexOf('\r\n\r\n');
    if (headEnd === -1) return;
    const [statusLine = '', ...lines] = received.slice(0, headEnd).split('\r\n');
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const body = received.slice(headEnd + 4);
    if (body.length >= Number(headers['content-length'])) resolveAnswer({ status: Number(statusLine.split(' ')[1]), headers, body, raw: received });
  });
  // EPIPE or ECONNRESET when the server cuts the connection off: that is the end expected.
  socket.on('error', () => {});
  const cutOff = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const pump = () => {
    while (!socket.destroyed && sent < bodyBytes) {
      sent += piece.length;
      if (!socket.write(piece)) return void socket.once('drain', pump);
    }
  };
  socket.write(head);
  pump();
  return { answer, cutOff, localPort: () => localPort };
}

/**
 * The server's end of each connection, by the client's port. What it has read
 * is what the server took in; what a client has sent may still sit in the
 * kernel's buffers (tens of MiB on loopback).
 */
function serverEnds(ctx: TestContext): (sender: Sender) => Socket {
  const sockets = new Map<number, Socket>();
  ctx.app.server.on('connection', (socket: Socket) => sockets.set(socket.remotePort!, socket));
  return (sender) => sockets.get(sender.localPort())!;
}

/** A request that announces a terabyte: more than any client here sends before the bound. */
const oversizedHead = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${1024 ** 4}\r\n\r\n`;

/** What the process holds in its JavaScript heap and in Buffers, after a full collection. */
function memoryInUse(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

describe('lingering close, with raw sockets against the app listening on 127.0.0.1', { timeout: 120_000 }, () => {
  let ctx: TestContext;
  let port: number;
  let serverEndOf: (sender: Sender) => Socket;
  before(async () => {
    ctx = await createTestApp();
    serverEndOf = serverEnds(ctx);
    port = Number(new URL(await ctx.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });
  after(() => ctx.close());

  const openConnections = () => new Promise<number>((resolve, reject) => ctx.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

  test('a client that keeps sending after its 413 is read from and its bytes dropped, not kept, until the bound cuts it off', async () => {
    const before = memoryInUse();
    const sender = sendWithoutEnd(port, oversizedHead('/api/auth/login'));
    assertRawProblem(await sender.answer, 413, 'payload_too_large');
    const serverEnd = serverEndOf(sender);
    const readAtAnswer = serverEnd.bytesRead;
    const readPastAnswer = () => serverEnd.bytesRead - readAtAnswer;
    await Promise.race([sender.cutOff, eventually(() => (readPastAnswer() >= DISCARDED ? true : undefined), 60_000)]);
    assert.ok(readPastAnswer() >= DISCARDED, `cut off after ${(readPastAnswer() / MIB).toFixed(1)} MiB read past the answer`);
    // V8 frees the memory of collected buffers on a thread of its own after the collection, and a loaded machine can
    // still count it for a moment (CI saw 30 of 32 MiB): bytes kept would never go, bytes dropped go within a second.
    let growth = memoryInUse() - before;
    for (let tries = 0; growth >= DISCARDED / 2 && tries < 20; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      growth = memoryInUse() - before;
    }
    assert.ok(growth < DISCARDED / 2, `the process grew by ${(growth / MIB).toFixed(1)} MiB while ${(readPastAnswer() / MIB).toFixed(1)} MiB were discarded`);
    // It never stops sending: only the bound ends the connection.
    await sender.cutOff;
    assert.equal(await eventually(async () => ((await openConnections()) === 0 ? 0 : undefined)), 0);
  });

  test('a client that stops sending after its 413 but never closes is let go', async () => {
    const sender = sendWithoutEnd(port, oversizedHead('/api/auth/login'), MIB);
    assertRawProblem(await sender.answer, 413, 'payload_too_large');
    assert.equal(await eventually(async () => ((await openConnections()) === 0 ? 0 : undefined)), 0);
  });

  test('a request answered before its body (401) keeps its connection once the body has arrived whole', async () => {
    const bodyBytes = 4 * MIB;
    const socket = connect({ port, host: '127.0.0.1' });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.write(`POST /api/keys HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${bodyBytes}\r\n\r\n`);
    await eventually(() => (received.includes('"unauthenticated"') ? true : undefined));
    assert.match(received, /^HTTP\/1\.1 401 /);
    assert.doesNotMatch(received, /connection: close/i);
    socket.write(Buffer.alloc(bodyBytes, ' '));
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await eventually(() => (received.includes('{"ok":true}') ? true : undefined));
    assert.match(received, /HTTP\/1\.1 200 OK/);
    socket.destroy();
  });
});

test('a graceful close waits for lingering connections only until their bound, reading them meanwhile', { timeout: 120_000 }, async () => {
  const ctx = await createTestApp();
  const serverEndOf = serverEnds(ctx);
  const port = Number(new URL(await ctx.app.listen({ host: '127.0.0.1', port: 0 })).port);
  const senders = [sendWithoutEnd(port, oversizedHead('/api/auth/login')), sendWithoutEnd(port, oversizedHead('/api/keys'))];
  assertRawProblem(await senders[0]!.answer, 413, 'payload_too_large');
  // Unauthenticated: answered before its body is read, on a connection kept alive, which Node would read on without end.
  assertRawProblem(await senders[1]!.answer, 401, 'unauthenticated');
  const readAtClose = senders.map((sender) => serverEndOf(sender).bytesRead);
  // Neither client ever stops sending: without the bound, this close would not end.
  await ctx.close();
  for (const [i, sender] of senders.entries()) {
    await sender.cutOff;
    const readWhileClosing = serverEndOf(sender).bytesRead - readAtClose[i]!;
    assert.ok(readWhileClosing >= MIB, `only ${(readWhileClosing / MIB).toFixed(1)} MiB were read while closing`);
  }
});
