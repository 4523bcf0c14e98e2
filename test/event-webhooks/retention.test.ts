import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, registerUser, type TestUser } from '../support/app.ts';
import { finishedRun, machineSuite, runningMachine } from '../support/machines.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, emit } from './helpers.ts';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/** CONTRACT 13: RETENTION (30 days by default) and the cleanup of what can no longer matter, in batches, counted in /metrics. */
describe('retention', () => {
  // A failed first attempt is retried 60 days later: a delivery pending past RETENTION.
  const suite = machineSuite({ env: { WEBHOOK_MAX_ATTEMPTS: '2', WEBHOOK_RETRY_DELAYS: '1440h' } });
  let user: TestUser;
  let receiver: Receiver;
  let failing = false;
  let stalledUp = false;

  before(async () => {
    user = suite.owner.user;
    receiver = await startReceiver((request) => (failing || (request.path.endsWith('/stalled') && !stalledUp) ? { status: 500 } : { status: 200 }));
  });
  after(() => receiver.close());

  const count = async (table: 'events' | 'deliveries' | 'delivery_attempts' | 'runs' | 'sessions' | 'email_tokens' | 'rate_limits', where?: [string, string]) => {
    let query = suite.ctx.app.deps.db.selectFrom(table).select((eb) => eb.fn.countAll<number | string>().as('n'));
    if (where) query = query.where(where[0] as never, '=', where[1] as never);
    return Number((await query.executeTakeFirstOrThrow()).n);
  };
  const idsOf = async (table: 'events' | 'deliveries' | 'runs') => (await suite.ctx.app.deps.db.selectFrom(table).select('id').execute()).map((row) => row.id);
  const deletedCounter = async (kind: string) => {
    const text = (await suite.ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    const match = new RegExp(`^retention_deleted_rows_total\\{kind="${kind}"\\} (\\d+)`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  };
  /** Runs the retention job until its pass is over (it pauses between bursts of batches). */
  const prune = async () => {
    for (let i = 0; i < 20; i++) {
      suite.ctx.clock.advance(MINUTE);
      await suite.ctx.app.jobs.drain();
    }
  };

  test('deletes what is older than RETENTION and keeps pending deliveries, their events, and everything newer', async () => {
    const start = suite.ctx.clock.now();
    const endpoint = await createEndpoint(suite.ctx, user, { url: `${receiver.url}/kept`, events: ['machine.created', 'run.failed'] });
    const stalled = await createEndpoint(suite.ctx, user, { url: `${receiver.url}/stalled`, events: ['run.failed'] });
    const machine = await runningMachine(suite.ctx, suite.owner);
    // Old: delivered deliveries, a failed one (a test), events nobody received, a finished run, a pending delivery (its receiver down).
    const delivered = await emit(suite.ctx, user.id, 'machine.created');
    await suite.ctx.app.jobs.drain();
    failing = true;
    assert.equal((await suite.ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) })).json().ok, false);
    failing = false;
    await emit(suite.ctx, user.id, 'machine.stopped', { machine: {}, detail: {} });
    const oldRun = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'echo old' });
    const carried = await emit(suite.ctx, user.id, 'run.failed', { run: {}, machine: {} });
    await suite.ctx.app.jobs.drain();
    const oldEvents = await idsOf('events');
    const oldDeliveries = await idsOf('deliveries');
    assert.ok(oldDeliveries.length >= 5);
    assert.ok((await count('delivery_attempts')) >= 4);

    // 29 days later: new ones.
    suite.ctx.clock.set(start + 29 * DAY);
    const recent = await emit(suite.ctx, user.id, 'machine.created');
    await suite.ctx.app.jobs.drain();
    const recentRun = await finishedRun(suite.ctx, suite.owner, machine.id, { command: 'echo new' });

    // Day 30 + a bit: the old ones are past RETENTION, the new ones are not.
    suite.ctx.clock.set(start + 30 * DAY + MINUTE);
    const attemptsBefore = await count('delivery_attempts');
    await prune();

    const events = await idsOf('events');
    const deliveries = await suite.ctx.app.deps.db.selectFrom('deliveries').select(['id', 'event_id', 'status']).execute();
    const pending = deliveries.filter((d) => d.status === 'pending');
    assert.equal(pending.length, 1, 'the pending delivery is kept');
    assert.equal(pending[0]!.event_id, carried.id);
    assert.ok(events.includes(carried.id), 'and the event it carries');
    assert.ok(events.includes(recent.id), 'newer events are kept');
    assert.ok(!events.includes(delivered.id), 'older ones go');
    for (const id of oldEvents) assert.equal(events.includes(id), id === carried.id, `old event ${id}`);
    for (const d of deliveries) assert.ok(d.status === 'pending' || !oldDeliveries.includes(d.id), `old finished delivery ${d.id} is gone`);
    assert.ok(deliveries.some((d) => d.event_id === recent.id), 'newer deliveries are kept');
    const runs = await idsOf('runs');
    assert.ok(!runs.includes(oldRun.id));
    assert.ok(runs.includes(recentRun.id));
    // The attempt logs of deleted deliveries went with them; the others' stay.
    const orphanAttempts = await suite.ctx.app.deps.db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'not in', deliveries.map((d) => d.id)).execute();
    assert.deepEqual(orphanAttempts, []);
    assert.ok((await count('delivery_attempts')) < attemptsBefore);

    assert.equal(await deletedCounter('deliveries'), oldDeliveries.length - 1);
    assert.ok((await deletedCounter('delivery_attempts')) >= 4);
    assert.equal(await deletedCounter('events'), oldEvents.length - 1);
    assert.ok((await deletedCounter('runs')) >= 1);

    // Once its receiver is back, the kept delivery is sent at its time; then it ages out too.
    stalledUp = true;
    suite.ctx.clock.set(start + 61 * DAY);
    await suite.ctx.app.jobs.drain();
    assert.equal(await count('deliveries', ['status', 'pending']), 0);
    await prune();
    assert.ok(!(await idsOf('events')).includes(carried.id));
    assert.equal(await count('deliveries'), 0);
  });

  test('expired sessions, used or expired emailed links and old rate-limit counters go too', async () => {
    const now = suite.ctx.clock.now();
    const idle = await registerUser(suite.ctx);
    const fresh = await registerUser(suite.ctx);
    const { db } = suite.ctx.app.deps;
    await suite.ctx.app.jobs.drain(); // the confirmation mails: their links exist once sent
    await db.updateTable('sessions').set({ last_seen_at: now - 31 * DAY }).where('account_id', '=', idle.id).execute();
    await db.updateTable('email_tokens').set({ used_at: now }).where('account_id', '=', idle.id).execute();
    await db.insertInto('rate_limits').values([{ key: 'test:old', window_started_at: now - 2 * DAY, hits: 1 }, { key: 'test:new', window_started_at: now, hits: 1 }]).execute();
    const sessionsBefore = await deletedCounter('sessions');
    await prune();
    assert.equal(await count('sessions', ['account_id', idle.id]), 0);
    assert.equal(await count('sessions', ['account_id', fresh.id]), 1);
    assert.equal(await count('email_tokens', ['account_id', idle.id]), 0);
    assert.equal(await count('rate_limits', ['key', 'test:old']), 0);
    assert.equal(await count('rate_limits', ['key', 'test:new']), 1);
    assert.equal(await deletedCounter('sessions'), sessionsBefore + 1);
    assert.ok((await deletedCounter('email_tokens')) >= 1);
    assert.ok((await deletedCounter('rate_limits')) >= 1);
    assert.equal((await suite.ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(idle.session) })).statusCode, 401);
    assert.equal((await suite.ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(fresh.session) })).statusCode, 200);
  });
});
