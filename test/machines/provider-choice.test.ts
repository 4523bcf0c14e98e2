import { strict as assert } from 'node:assert';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { asSession, createTestApp, registerUser } from '../support/app.ts';

/** Runs `body` with DOCKER_HOST set as given (Docker's clients read it from the environment), then puts it back. */
async function withDockerHost<T>(value: string, body: () => Promise<T>): Promise<T> {
  const before = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = value;
  try {
    return await body();
  } finally {
    if (before === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = before;
  }
}

describe('MACHINE_PROVIDER=auto where no Docker engine answers: the simulated provider, said so', () => {
  test('no socket at DOCKER_HOST: simulated, and GET /api/dashboard/machines says so', async () => {
    await withDockerHost('unix:///nonexistent/machine-platform-test/docker.sock', async () => {
      const ctx = await createTestApp({ env: { MACHINE_PROVIDER: 'auto' } });
      try {
        assert.equal(ctx.app.machineProvider.name, 'simulated');
        assert.deepEqual({ ...ctx.app.machineHost, image: ctx.app.machineHost.image() }, {
          configured: 'auto',
          provider: 'simulated',
          noEngine: 'no Docker engine at unix:///nonexistent/machine-platform-test/docker.sock',
          image: null,
        });
        const user = await registerUser(ctx);
        const response = await ctx.app.inject({ method: 'GET', url: '/api/dashboard/machines', headers: asSession(user.session, ctx.config.publicUrl) });
        assert.equal(response.statusCode, 200);
        assert.deepEqual(response.json(), { provider: 'simulated', configured: 'auto', image: null });
        // The dashboard's session only: an API key has no use for it.
        assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/dashboard/machines' })).statusCode, 401);
      } finally {
        await ctx.close();
      }
    });
  });

  test('an engine address that refuses the connection: simulated, naming the address and its answer', async () => {
    // A port nothing listens on: taken, then let go.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    await withDockerHost(`tcp://127.0.0.1:${port}`, async () => {
      const ctx = await createTestApp({ env: { MACHINE_PROVIDER: 'auto' } });
      try {
        assert.equal(ctx.app.machineProvider.name, 'simulated');
        assert.equal(ctx.app.machineHost.provider, 'simulated');
        assert.match(ctx.app.machineHost.noEngine ?? '', new RegExp(`^no Docker engine answered at tcp://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`));
      } finally {
        await ctx.close();
      }
    });
  });

  test('MACHINE_PROVIDER=simulated stays simulated whatever the engine', async () => {
    const ctx = await createTestApp({ env: { MACHINE_PROVIDER: 'simulated' } });
    try {
      assert.deepEqual({ configured: ctx.app.machineHost.configured, provider: ctx.app.machineHost.provider, noEngine: ctx.app.machineHost.noEngine }, { configured: 'simulated', provider: 'simulated', noEngine: null });
    } finally {
      await ctx.close();
    }
  });
});
