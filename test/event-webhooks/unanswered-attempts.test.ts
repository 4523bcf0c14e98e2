import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { createServer as createTcpServer, type Server } from 'node:net';
import { after, describe, test } from 'node:test';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { createSender } from '../../src/event-webhooks/sender.ts';
import { freePort } from '../support/service-process.ts';

const tls = { key: readFileSync(new URL('../support/tls/server.key', import.meta.url)), cert: readFileSync(new URL('../support/tls/server.pem', import.meta.url)) };
const headers = { 'content-type': 'application/json' };

/** A TLS receiver that does `onData` with each connection's first bytes; answers the URL it listens on. */
async function rawReceiver(servers: Server[], onData: (socket: TLSSocket, seen: Buffer) => void): Promise<string> {
  const server = createTlsServer(tls, (socket) => {
    let seen = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      onData(socket, seen);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
}

/**
 * Issue 27: a black-box run listed two attempts for a delivery whose receiver
 * saw one. An attempt is recorded whether or not its request reached the
 * receiver (a connection that fails first is an attempt too); its error says
 * how far it got, wherever the failure does not say so itself.
 */
describe('an attempt without an answer says how far it got', () => {
  const servers: Server[] = [];
  const sender = createSender({ timeoutMs: 1500, allowPrivateTargets: true });
  after(async () => {
    await sender.close();
    for (const server of servers) server.close();
  });

  test('a receiver that drops the connection once the whole request is in: the request was sent', async () => {
    const url = await rawReceiver(servers, (socket, seen) => {
      if (seen.includes('\r\n\r\n{"n":1}')) socket.destroy();
    });
    const result = await sender.send(url, headers, '{"n":1}');
    assert.equal(result.status, null);
    assert.match(String(result.error), /^connection (closed|reset) by the receiver \(the request was sent\)$/);
  });

  test('a listener that never completes the TLS handshake: no connection, nothing sent', async () => {
    const silent = createTcpServer(() => {});
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const result = await sender.send(`https://127.0.0.1:${(silent.address() as { port: number }).port}/hook`, headers, '{}');
    assert.match(String(result.error), /^(no connection within 1500 ms \(nothing was sent\)|connection timed out)$/);
  });

  test('a closed port: the error names the connection step, which says nothing was sent', async () => {
    const result = await sender.send(`https://127.0.0.1:${await freePort()}/hook`, headers, '{}');
    assert.equal(result.error, 'connection refused');
  });

  test('an attempt let go by its process (its lease, a stop) says it was stopped, and how far it got', async () => {
    const url = await rawReceiver(servers, () => {});
    const controller = new AbortController();
    const pending = sender.send(url, headers, '{"n":2}', controller.signal);
    setTimeout(() => controller.abort(new Error('this process is stopping')), 300);
    const result = await pending;
    assert.equal(result.error, 'stopped: this process is stopping (the request was sent)');
    const early = new AbortController();
    early.abort(new Error('this process is stopping'));
    assert.equal((await sender.send(url, headers, '{}', early.signal)).error, 'stopped: this process is stopping (nothing was sent)');
  });
});
