import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { inTransaction } from '../../src/db/transaction.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** CONTRACT 11, the default: after the n-th failed attempt the next waits DELAYS[n-1]; the 8th failure is the last. */
const DELAYS = [30 * SECOND, 1 * MINUTE, 2 * MINUTE, 4 * MINUTE, 8 * MINUTE, 16 * MINUTE, 32 * MINUTE];

/**
 * The default schedule (WEBHOOK_RETRY_DELAYS and WEBHOOK_MAX_ATTEMPTS unset)
 * through every path that schedules an attempt, on the test's clock: an
 * attempt that fails, a probe of a failing endpoint, an attempt failed without
 * a connection while its endpoint is failing, and an attempt whose process
 * died holding it. Each keeps to the same retry function (src/event-webhooks/retry.ts).
 */
describe('the default retry schedule, on every path', () => {
  let ctx: TestContext;
  let user: TestUser;
  let down: Receiver;

  before(async () => {
    ctx = await createTestApp({ env: { WEBHOOK_TIMEOUT_MS: '2000' } });
    user = await registerUser(ctx);
    down = await startReceiver(() => ({ status: 503 }));
  });
  after(async () => {
    await down.close();
    await ctx.close();
  });

  const at = (epochMs: number) => new Date(epochMs).toISOString();
  const advanceTo = async (epochMs: number) => {
    ctx.clock.set(epochMs);
    await ctx.app.jobs.drain();
  };

  test('a failing attempt, then probes of the failing endpoint: at once, then 30 s, 1, 2, 4, 8, 16 and 32 min; failed after the 8th', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: `${down.url}/single`, events: ['machine.created'] });
    const start = ctx.clock.now();
    await emit(ctx, user.id, 'machine.created');
    await ctx.app.jobs.drain();
    let due = start;
    for (let n = 1; n <= 8; n++) {
      const [delivery] = await deliveriesOf(ctx, user, endpoint.id);
      assert.equal(delivery?.attempts, n, `attempt ${n} made at ${at(due)}`);
      assert.equal(delivery?.lastResponse?.at, at(due));
      assert.equal(delivery?.lastResponse?.status, 503, 'every one of them sent (from the 5th on, as a probe)');
      if (n === 8) {
        assert.equal(delivery?.status, 'failed');
        assert.equal(delivery?.nextAttemptAt, null);
        break;
      }
      const next = due + DELAYS[n - 1]!;
      assert.equal(delivery?.status, 'pending');
      assert.equal(delivery?.nextAttemptAt, at(next));
      await advanceTo(next - 1);
      assert.equal((await deliveriesOf(ctx, user, endpoint.id))[0]?.attempts, n, 'not a millisecond early');
      await advanceTo(next);
      due = next;
    }
    assert.equal(down.requests.filter((request) => request.path.endsWith('/single')).length, 8);
    assert.deepEqual(await ctx.app.deps.db.selectFrom('jobs').select('id').where('lane', '=', endpoint.id).execute(), [], 'its job is gone');
  });

  test('attempts failed without a connection, while a probe stands for their failing endpoint, keep the same schedule', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: `${down.url}/many`, events: ['machine.error'] });
    const start = ctx.clock.now();
    // Six events of one change: their first attempts all start before any has failed (later ones would wait for a probe).
    await inTransaction(ctx.app.deps.database, async (tx) => {
      for (let i = 0; i < 6; i++) await emitEvent(ctx.app.deps, tx, { accountId: user.id, type: 'machine.error', data: { machine: {}, detail: {} } });
    });
    await ctx.app.jobs.drain();
    let due = start;
    for (let n = 1; n <= 8; n++) {
      const deliveries = await deliveriesOf(ctx, user, endpoint.id);
      assert.equal(deliveries.length, 6);
      assert.ok(deliveries.every((d) => d.attempts === n && d.lastResponse?.at === at(due)), `attempt ${n} of all six at ${at(due)}: ${JSON.stringify(deliveries.map((d) => [d.attempts, d.lastResponse?.at]))}`);
      if (n > 1) {
        const unsent = deliveries.filter((d) => d.lastResponse?.error?.startsWith('not sent: the endpoint failed its last'));
        assert.equal(unsent.length, 5, 'one probe over a connection, five failed without one');
        assert.ok(unsent.every((d) => d.lastResponse?.status === null));
      }
      if (n === 8) {
        assert.ok(deliveries.every((d) => d.status === 'failed' && d.nextAttemptAt === null));
        break;
      }
      const next = due + DELAYS[n - 1]!;
      assert.ok(deliveries.every((d) => d.status === 'pending' && d.nextAttemptAt === at(next)), `all due again at ${at(next)}`);
      await advanceTo(next);
      due = next;
    }
    assert.equal(down.requests.filter((request) => request.path.endsWith('/many')).length, 6 + 7, 'six first attempts, then one probe per round');
  });

  test('an attempt whose process died holding it is made once its lease runs out, and the schedule goes on from there, nothing counted twice', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: `${down.url}/crash`, events: ['run.failed'] });
    const start = ctx.clock.now();
    await emit(ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await ctx.app.jobs.drain();
    await advanceTo(start + DELAYS[0]!);
    await advanceTo(start + DELAYS[0]! + DELAYS[1]!);
    let [delivery] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(delivery?.attempts, 3);
    const due = start + DELAYS[0]! + DELAYS[1]! + DELAYS[2]!;
    assert.equal(delivery?.nextAttemptAt, at(due));

    // At its time, another process takes the job and dies before answering: its lease (2 × timeout + 1 s) holds the job.
    const leaseMs = 2 * 2000 + 1000;
    await ctx.app.deps.db.updateTable('jobs').set({ locked_by: 'dead-host/1/0000', locked_until: due + leaseMs }).where('lane', '=', endpoint.id).execute();
    await advanceTo(due);
    await advanceTo(due + leaseMs);
    assert.equal((await deliveriesOf(ctx, user, endpoint.id))[0]?.attempts, 3, 'not while the dead process holds it');
    await advanceTo(due + leaseMs + 1);
    [delivery] = await deliveriesOf(ctx, user, endpoint.id);
    assert.equal(delivery?.attempts, 4, 'the attempt is made once, by the process that took over; the dead one is not counted');
    assert.equal(delivery?.lastResponse?.at, at(due + leaseMs + 1));
    assert.equal(delivery?.nextAttemptAt, at(due + leaseMs + 1 + DELAYS[3]!), 'and the schedule goes on from the attempt actually made');
    assert.equal(down.requests.filter((request) => request.path.endsWith('/crash')).length, 4);
  });
});
