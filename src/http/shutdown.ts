import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Connections } from './connections.ts';
import { sendProblem } from './error-handler.ts';
import { isLingering } from './lingering-close.ts';

const RETRY_AFTER_SECONDS = '5';
/** While draining, how often connections with no request in progress are looked for (and closed at the next look). */
const SWEEP_MS = 50;

/**
 * How the server drains on close. A request that still arrives (pipelined, or
 * on a keep-alive connection) gets 503 service_unavailable as problem+json;
 * this stands in for Fastify's return503OnClosing, which answers in its own
 * JSON shape. Requests already in flight run to their end, and their answers
 * carry `Connection: close`, so Node closes each connection once its last
 * answer is written. Every connection with no request in progress is closed:
 * idle keep-alive ones, and ones where a request has only begun to arrive (a
 * stuck client). Otherwise a client that was busy when the drain began and then
 * went quiet (a draining load balancer) held the process open until the
 * keep-alive timeout (72 s), and a half-sent request until the headers timeout.
 * Register it before any other onRequest hook, so nothing else runs for a refused request.
 */
export function refuseWhileClosing(app: FastifyInstance, publicUrl: string, connections: Connections): void {
  let closing = false;
  let sweeper: NodeJS.Timeout | undefined;
  const open = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  // Closed once a connection has had no request in progress for a whole sweep: a request that is just arriving
  // on a fresh connection gets its 503 rather than a reset.
  let unbusy = new Set<Socket>();
  const closeUnbusyConnections = () => {
    const now = new Set<Socket>();
    for (const socket of open) {
      // A lingering connection has had its answer and closes within its own bound: closing it now could reset the answer away.
      if (connections.busy(socket) || isLingering(socket)) continue;
      if (unbusy.has(socket)) socket.destroy();
      else now.add(socket);
    }
    unbusy = now;
  };
  app.addHook('preClose', (done) => {
    closing = true;
    sweeper = setInterval(closeUnbusyConnections, SWEEP_MS).unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(sweeper);
    done();
  });
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    // Fastify has already asked for `Connection: close` on this response.
    sendProblem(reply, publicUrl, 503, 'service_unavailable', 'The service is shutting down. Retry; another instance will answer.', {
      'retry-after': RETRY_AFTER_SECONDS,
    });
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
}
