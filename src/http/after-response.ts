import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyReply {
    /** Runs `task` in the background once the response has been sent. */
    afterResponse(name: string, task: () => Promise<unknown>): void;
  }
  interface FastifyRequest {
    afterResponseTasks: Array<{ name: string; task: () => Promise<unknown> }> | null;
  }
}

/**
 * Work that must not delay or shape the response (mail, above all), so that
 * neither a slow mail server nor the existence of an account shows in timing.
 */
export const afterResponsePlugin = fp(
  async (app) => {
    app.decorateRequest('afterResponseTasks', null);
    app.decorateReply('afterResponse', function (name: string, task: () => Promise<unknown>) {
      (this.request.afterResponseTasks ??= []).push({ name, task });
    });
    app.addHook('onResponse', (request, _reply, done) => {
      if (request.afterResponseTasks !== null) {
        for (const { name, task } of request.afterResponseTasks) app.deps.background.run(name, task);
      }
      done();
    });
  },
  { name: 'after-response', dependencies: ['core'] },
);
