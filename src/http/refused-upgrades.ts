import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/**
 * Closes the connection after any answer to a request that asked to upgrade
 * and was not upgraded. @fastify/websocket routes every such request through
 * Fastify on a socket Node's HTTP server has already let go of, so nothing
 * else would: the client would wait on an open connection after its answer,
 * and a graceful stop would wait for it too. Node's own refusal of an upgrade
 * closes the connection the same way.
 */
export function closeAfterRefusedUpgrades(app: FastifyInstance): void {
  // After every plugin has loaded, so that this listener runs after the one @fastify/websocket adds.
  app.addHook('onReady', (done) => {
    app.server.on('upgrade', (_request, socket: Duplex & { _httpMessage?: ServerResponse | null }) => {
      // The response @fastify/websocket answers with; an upgrade that succeeds never writes it.
      const response = socket._httpMessage;
      if (!response) return;
      if (!response.headersSent) response.shouldKeepAlive = false;
      if (response.writableFinished) socket.end();
      else response.once('finish', () => socket.end());
    });
    done();
  });
}
