import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyReply {
    /** Runs `task` in the background once the response has been sent, or once the client has gone. */
    afterResponse(name: string, task: () => Promise<unknown>): void;
  }
}

/**
 * Work that must not delay or shape the response, so that neither a slow mail
 * server nor the existence of an account shows in its timing (`forgot`).
 *
 * Tied to the raw response's `close`, not to Fastify's onResponse: `close`
 * comes after the response is written and also when the client disconnects
 * first, where onResponse never fires and the work would silently be lost.
 * A task handed over after the client has gone starts at once.
 */
export const afterResponsePlugin = fp(
  async (app) => {
    app.decorateReply('afterResponse', function (name: string, task: () => Promise<unknown>) {
      const start = () => app.deps.background.run(name, task);
      if (this.raw.closed) start();
      else this.raw.once('close', start);
    });
  },
  { name: 'after-response', dependencies: ['core'] },
);
