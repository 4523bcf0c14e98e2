import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, settled, type TestContext, type TestUser } from './support/app.ts';
import { eventually, startReceiver, type Receiver } from './support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './event-webhooks/helpers.ts';
import { BOOT_MS, createMachine, newOwner, workerPass } from './support/machines.ts';

/**
 * The speed options (bench/RESULTS.md) change how fast, never what: with all
 * four off, on either engine, the service does the same, by its plain paths
 * (every statement unnamed, every BEGIN a round trip of its own, every SQLite transaction its own commit, every
 * job claimed by a poll that the commit wakes).
 */
describe('with PG_PREPARED_STATEMENTS, PG_PIPELINED_BEGIN, SQLITE_GROUP_COMMIT and JOBS_HANDOVER off', () => {
  let ctx: TestContext;
  let user: TestUser;
  let hook: Receiver;

  before(async () => {
    ctx = await createTestApp({
      env: { PG_PREPARED_STATEMENTS: 'off', PG_PIPELINED_BEGIN: 'off', SQLITE_GROUP_COMMIT: 'off', JOBS_HANDOVER: 'off', MACHINE_BOOT_MS: String(BOOT_MS) },
      buildOptions: { runnerOptions: { pollIntervalMs: 3_600_000 } },
    });
    user = await registerUser(ctx);
    hook = await startReceiver((_request, n) => ({ status: n === 1 ? 503 : 200 }));
  });
  after(async () => {
    await hook.close();
    await ctx.close();
  });

  test('a delivery starts at once on commit (no poll for an hour), fails, is retried on schedule, and is delivered', async () => {
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
  });

  test('mail, machines and runs go through their jobs the same way', async () => {
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
