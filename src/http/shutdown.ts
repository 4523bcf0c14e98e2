import type { FastifyInstance } from 'fastify';
import { sendProblem } from './error-handler.ts';

const RETRY_AFTER_SECONDS = '5';

/**
 * While the server drains, a request that still arrives (pipelined, or on a
 * keep-alive connection that was busy) gets 503 service_unavailable as
 * problem+json. This stands in for Fastify's return503OnClosing, which answers
 * in its own JSON shape; requests already in flight run to their end.
 * Register it before any other onRequest hook, so nothing else runs for such a request.
 */
export function refuseWhileClosing(app: FastifyInstance, publicUrl: string): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    // Fastify has already asked for `Connection: close` on this response.
    sendProblem(reply, publicUrl, 503, 'service_unavailable', 'The service is shutting down. Retry; another instance will answer.', {
      'retry-after': RETRY_AFTER_SECONDS,
    });
  });
}
