import { strict as assert } from 'node:assert';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { trackConnections } from '../../src/http/connections.ts';

/** What Node's server does with a connection's requests, as the tracker sees it through public events only (issue 42). */
test('a connection is busy while its requests (pipelined ones too) are answered, answering once an answer has begun, and handed over on an upgrade', async () => {
  const connections = trackConnections();
  const server = createServer();
  connections.watch(server);
  const arrived: Array<{ request: IncomingMessage; response: ServerResponse }> = [];
  server.on('request', (request: IncomingMessage, response: ServerResponse) => void arrived.push({ request, response }));
  const upgrades: Array<{ request: IncomingMessage; socket: Socket }> = [];
  server.on('upgrade', (request: IncomingMessage, socket: Socket) => void upgrades.push({ request, socket }));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const until = async (condition: () => boolean) => {
    while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  try {
    const client = connect(port, '127.0.0.1');
    client.resume();
    // Two requests at once: Node answers the second only once the first is finished.
    client.write('GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => arrived.length === 2);
    const socket = arrived[0]!.request.socket;
    assert.equal(connections.busy(socket), true);
    assert.equal(connections.answering(socket), false, 'nothing written yet');
    arrived[0]!.response.writeHead(200, { 'content-length': '2' });
    arrived[0]!.response.flushHeaders();
    assert.equal(connections.answering(socket), true, 'the first answer has begun');
    arrived[0]!.response.end('ok');
    await once(arrived[0]!.response, 'finish');
    assert.equal(connections.busy(socket), true, 'the second request waits for its answer');
    assert.equal(connections.answering(socket), false, 'the second answer has not begun');
    arrived[1]!.response.end('ok');
    await once(arrived[1]!.response, 'finish');
    assert.equal(connections.busy(socket), false, 'both answered: an idle keep-alive connection');
    assert.equal(connections.upgrading(arrived[0]!.request), false);
    client.destroy();

    const upgrading = connect(port, '127.0.0.1');
    upgrading.write('GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    await until(() => upgrades.length === 1);
    assert.equal(connections.upgrading(upgrades[0]!.request), true);
    assert.equal(connections.busy(upgrades[0]!.socket), true, 'no longer Node\'s to close');
    upgrading.destroy();
    upgrades[0]!.socket.destroy();
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
