import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, settled, type TestContext, type TestUser } from './support/app.ts';
import { eventually, startReceiver, type Receiver } from './support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './event-webhooks/helpers.ts';
import { BOOT_MS, createMachine, newOwner, workerPass } from './support/machines.ts';

interface Service {
  ctx: TestContext;
  user: TestUser;
  /** Answers 503 once, then 200. */
  hook: Receiver;
}

/** A service with these settings for the tests of a describe, with no poll for an hour (only commits wake jobs). */
function serviceWith(env: Record<string, string>): Service {
  const service = {} as Service;
  before(async () => {
    service.ctx = await createTestApp({ env, buildOptions: { runnerOptions: { pollIntervalMs: 3_600_000 } } });
    service.user = await registerUser(service.ctx);
    service.hook = await startReceiver((_request, n) => ({ status: n === 1 ? 503 : 200 }));
  });
  after(async () => {
    await service.hook.close();
    await service.ctx.close();
  });
  return service;
}

/** The first attempt starts on commit (no poll for an hour), fails, and the second comes on schedule. */
async function deliversAfterOneRetry({ ctx, user, hook }: Service): Promise<void> {
  const endpoint = await createEndpoint(ctx, user, { url: hook.url });
  await emit(ctx, user.id, 'machine.created');
  await hook.waitFor(1);
  await ctx.app.jobs.drain();
  const [failed] = await deliveriesOf(ctx, user, endpoint.id);
  assert.deepEqual([failed?.status, failed?.attempts, failed?.nextAttemptAt], ['pending', 1, new Date(ctx.clock.now() + 30_000).toISOString()]);
  ctx.clock.advance(30_000);
  await ctx.app.jobs.drain();
  const [delivered] = await deliveriesOf(ctx, user, endpoint.id);
  assert.deepEqual([delivered?.status, delivered?.attempts], ['delivered', 2]);
}

/**
 * The speed options (bench/RESULTS.md) change how fast, never what: with both
 * off, on either engine, the service does the same, by its plain paths (every
 * statement unnamed, every webhook attempt made on the service's own thread).
 */
describe('with PG_PREPARED_STATEMENTS and WEBHOOK_SENDER_THREAD off', () => {
  const service = serviceWith({ PG_PREPARED_STATEMENTS: 'off', WEBHOOK_SENDER_THREAD: 'off', MACHINE_BOOT_MS: String(BOOT_MS) });

  test('a delivery starts at once on commit (no poll for an hour), fails, is retried on schedule, and is delivered', async () => {
    await deliversAfterOneRetry(service);
  });

  test('mail, machines and runs go through their jobs the same way', async () => {
    const { ctx, user } = service;
    const before = ctx.smtp.to(user.email).length;
    const changed = await ctx.app.inject({ method: 'POST', url: '/api/me/password', headers: asSession(user.session), payload: { currentPassword: user.password, newPassword: 'a second long password' } });
    assert.equal(changed.statusCode, 200);
    await settled(ctx);
    assert.equal(ctx.smtp.to(user.email).length, before + 1, 'the security notice');

    const owner = await newOwner(ctx);
    const machine = await createMachine(owner, { name: 'plain-paths' });
    ctx.clock.advance(BOOT_MS);
    await workerPass(ctx);
    assert.equal((await owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');
    const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'echo plain' })).json();
    await eventually(async () => ((await owner.call('GET', `/api/runs/${run.id}`)).json().status === 'succeeded' ? true : undefined), 5000, 'the run, woken by its commit');
  });
});

// On by default with SQLite, where the rest of the suite runs it; off by default with PostgreSQL, so it is turned on here.
describe('with WEBHOOK_SENDER_THREAD on, on either engine', () => {
  const service = serviceWith({ WEBHOOK_SENDER_THREAD: 'on' });

  test('a delivery starts at once on commit (no poll for an hour), fails, is retried on schedule, and is delivered', async () => {
    await deliversAfterOneRetry(service);
  });
});
