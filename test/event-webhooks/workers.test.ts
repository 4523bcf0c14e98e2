import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
import { startSmtpServer, type SmtpInbox } from '../support/mail.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, emit } from './helpers.ts';
import { Registry } from 'prom-client';
import { createDeliveryKind } from '../../src/event-webhooks/delivery.job.ts';
import { createDeliveryMetrics } from '../../src/event-webhooks/delivery.metrics.ts';
import { createSender } from '../../src/event-webhooks/sender.ts';
import { createRunner, DEFAULT_RUNNER_OPTIONS } from '../../src/jobs/runner.ts';

describe('several workers on one database', () => {
  let database: TestDatabase;
  let smtp: SmtpInbox;
  let first: TestContext;
  let second: TestContext;
  const receivers: Receiver[] = [];

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'workers-')), 'shared.db'));
    smtp = await startSmtpServer();
    const env = { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_DELAYS: '20ms', WEBHOOK_MAX_ATTEMPTS: '10' };
    first = await createTestApp({ database, smtp, realClock: true, env, buildOptions: { runnerOptions: { pollIntervalMs: 50 } } });
    second = await createTestApp({ database, smtp, realClock: true, env, buildOptions: { runnerOptions: { pollIntervalMs: 50 } } });
  });
  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await first.close();
    await second.close();
    await smtp.close();
    await database.drop();
  });

  test('every event is delivered, and no delivery is ever attempted twice at the same time', async () => {
    const user = await registerUser(first);
    // Slow, flaky receivers: attempts overlap in time, retries come fast, and both workers poll the same rows.
    for (let i = 0; i < 3; i++) {
      receivers.push(await startReceiver((_request, n) => ({ status: n % 3 === 0 ? 500 : 200, delayMs: 5 + (n % 7) })));
    }
    for (const receiver of receivers) await createEndpoint(first, user, { url: receiver.url });
    const emitted: string[] = [];
    for (let i = 0; i < 60; i++) {
      const event = await emit(i % 2 === 0 ? first : second, user.id, 'machine.created');
      emitted.push(event.id);
    }
    for (const receiver of receivers) {
      await eventually(() => {
        const delivered = new Set(receiver.requests.map((r) => JSON.parse(r.body).id));
        return emitted.every((id) => delivered.has(id)) || undefined;
      }, 20_000, 'every event at every receiver');
      assert.equal(receiver.maxConcurrentPerDelivery, 1, 'two attempts of one delivery overlapped');
    }
    const rows = await eventually(async () => {
      const pending = await first.app.deps.db.selectFrom('deliveries').select('status').where('status', '!=', 'delivered').execute();
      return pending.length === 0 ? true : undefined;
    }, 20_000, 'all deliveries recorded as delivered');
    assert.ok(rows);
  });
});

describe('a worker that stops', () => {
  let ctx: TestContext;
  let receiver: Receiver;

  before(async () => {
    // ROLE=api: the app has no worker of its own; the test runs one on a database whose claims it can hold up.
    ctx = await createTestApp({ realClock: true, env: { ROLE: 'api' } });
    receiver = await startReceiver(() => ({ status: 200 }));
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  test('regression: a claim under way when stop is called is waited for, and what it leased is given back', async () => {
    const user = await registerUser(ctx);
    await createEndpoint(ctx, user, { url: receiver.url });
    for (let i = 0; i < 5; i++) await emit(ctx, user.id, 'machine.created');

    // Holds the answer of the first UPDATE (the claim) after the database has run it: the leases are taken.
    let claimReached!: () => void;
    const reached = new Promise<void>((resolve) => (claimReached = resolve));
    let releaseClaim!: () => void;
    const held = new Promise<void>((resolve) => (releaseClaim = resolve));
    const updates = new Set<unknown>();
    let holding = true;
    const gated = ctx.app.deps.db.withPlugin({
      transformQuery: ({ node, queryId }) => {
        if (node.kind === 'UpdateQueryNode') updates.add(queryId);
        return node;
      },
      transformResult: async ({ queryId, result }) => {
        if (holding && updates.has(queryId)) {
          holding = false;
          claimReached();
          await held;
        }
        return result;
      },
    });
    const { deps } = ctx.app;
    const worker = createRunner({ database: deps.database, db: gated, clock: deps.clock, logger: deps.logger }, { ...DEFAULT_RUNNER_OPTIONS, pollIntervalMs: 60_000 });
    const sender = createSender(deps.config.webhook);
    worker.registerLaned(
      createDeliveryKind({
        db: gated,
        clock: deps.clock,
        logger: deps.logger,
        sender,
        metrics: createDeliveryMetrics(new Registry(), async () => 0),
        config: deps.config.webhook,
        otherProcessesCommits: () => 0,
      }),
    );
    worker.start();
    await reached;
    const leased = await deps.db.selectFrom('jobs').select('id').where('locked_by', '=', worker.id).execute();
    assert.equal(leased.length, 5, 'the claim ran');

    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    const stopped = worker.stop().then(() => 'stopped');
    const early = await Promise.race([stopped, new Promise((resolve) => setTimeout(() => resolve('waiting'), 100))]);
    assert.equal(early, 'waiting', 'stop returned while a claim was under way');
    releaseClaim();
    assert.equal(await stopped, 'stopped');
    process.off('warning', onWarning);
    assert.deepEqual(warnings, [], 'stop without a grace waits without a timer (Infinity would be 1 ms, over and over)');

    const rows = await deps.db.selectFrom('deliveries').select(['attempts', 'status']).execute();
    assert.deepEqual(rows.map((row) => [row.attempts, row.status]), Array(5).fill([0, 'pending']));
    const jobs = await deps.db.selectFrom('jobs').select(['locked_by', 'attempts']).where('kind', '=', 'webhook.delivery').execute();
    assert.deepEqual(jobs.map((job) => [job.locked_by, job.attempts]), Array(5).fill([null, 0]), 'what it leased is given back');
    assert.equal(receiver.requests.length, 0, 'nothing is sent after stop');
    await sender.close();
  });
});
