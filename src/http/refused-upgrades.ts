import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Connections } from './connections.ts';

/**
 * Closes the connection after any answer to a request that asked to upgrade
 * and was not upgraded. @fastify/websocket routes every such request through
 * Fastify on a socket Node's HTTP server has already let go of, so nothing
 * else would: the client would wait on an open connection after its answer,
 * and a graceful stop would wait for it too. Node's own refusal of an upgrade
 * closes the connection the same way. An upgrade that succeeds is hijacked and
 * never sends a reply. The router's own errors skip the onSend hooks: their
 * handler (error-handler.ts) calls closeIfRefusedUpgrade itself.
 */
export function closeAfterRefusedUpgrades(app: FastifyInstance, connections: Connections): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    closeIfRefusedUpgrade(connections, request, reply);
    done(null, payload);
  });
}

/** Before a reply is sent: if its request came by an upgrade, the answer says `Connection: close` and the connection ends after it. */
export function closeIfRefusedUpgrade(connections: Connections, request: FastifyRequest, reply: FastifyReply): void {
  if (!connections.upgrading(request.raw)) return;
  // Node's own answer to `Connection: close`, which it does not give on a connection it let go of, is given here.
  reply.header('connection', 'close');
  const socket = request.raw.socket;
  reply.raw.once('finish', () => socket.end());
}
