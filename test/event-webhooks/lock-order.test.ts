import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { sql, type RawBuilder } from 'kysely';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { onPostgres } from '../support/database.ts';
import { eventually, receiverPool } from '../support/receiver.ts';
import { createEndpoint, emit } from './helpers.ts';

/**
 * An endpoint deleted while the worker settles an attempt of one of its
 * deliveries: on PostgreSQL each transaction takes row locks, and two that
 * take the same rows in opposite orders deadlock (one of them fails). A third
 * transaction holds a row the settlement needs until both are waiting, so the
 * two meet at the worst moment every run.
 */
describe('an endpoint deleted while its attempts are settled', { skip: !onPostgres && 'SQLite runs one writer at a time' }, () => {
  let ctx: TestContext;
  let user: TestUser;
  const logs: string[] = [];
  const receivers = receiverPool();

  before(async () => {
    ctx = await createTestApp({ realClock: true, logs, env: { WEBHOOK_TIMEOUT_MS: '10000', WEBHOOK_RETRY_DELAYS: '1h' } });
    user = await registerUser(ctx);
  });
  after(async () => {
    await receivers.closeAll();
    await ctx.close();
  });

  /** A transaction that holds the rows `lock` locks until released, and its server process id. */
  function holdLock(lock: RawBuilder<unknown>) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started!: (pid: number) => void;
    const pid = new Promise<number>((resolve) => (started = resolve));
    const done = ctx.app.deps.db.transaction().execute(async (trx) => {
      await lock.execute(trx);
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      started(rows[0]!.pid);
      await released;
    });
    return { pid, release: () => (release(), done) };
  }

  /** Server processes waiting for a lock that one of `pids` holds. */
  async function waitingFor(pids: number[]): Promise<number[]> {
    const { rows } = await sql<{ pid: number }>`select pid from pg_stat_activity where pg_blocking_pids(pid) && ${pids}::int[]`.execute(ctx.app.deps.db);
    return rows.map((row) => row.pid);
  }

  const problems = () => logs.map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message?: string } }).filter((line) => line.level >= 40).map((line) => `${line.msg}: ${line.err?.message}`);

  /**
   * The attempt ends, its settlement waits behind `lockedRow`, then the delete
   * starts and waits too; the row is let go and both must finish: the delete
   * answers 204 and the settlement logs no failure.
   */
  async function deleteWhileSettling(status: number, lockedRow: (deliveryId: string) => RawBuilder<unknown>) {
    logs.length = 0;
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const hook = await receivers.start(() => ({ status, after: answered }));
    const endpoint = await createEndpoint(ctx, user, { url: hook.url, events: ['machine.created'] });
    const event = await emit(ctx, user.id, 'machine.created');
    await hook.waitFor(1);
    const delivery = await ctx.app.deps.db.selectFrom('deliveries').select('id').where('event_id', '=', event.id).executeTakeFirstOrThrow();
    const blocker = holdLock(lockedRow(delivery.id));
    const blockerPid = await blocker.pid;
    answer();
    const [settling] = await eventually(
      async () => {
        const waiting = await waitingFor([blockerPid]);
        return waiting.length === 1 ? waiting : undefined;
      },
      10_000,
      'the settlement waiting',
    );
    const deleting = ctx.app.inject({ method: 'DELETE', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session) });
    await eventually(async () => ((await waitingFor([blockerPid, settling!])).some((pid) => pid !== settling) ? true : undefined), 10_000, 'the delete waiting');
    await blocker.release();
    const deleted = await deleting;
    await ctx.app.jobs.drain();
    assert.equal(deleted.statusCode, 204, deleted.body);
    assert.deepEqual(problems(), []);
    const left = await ctx.app.deps.db.selectFrom('deliveries').select('id').where('endpoint_id', '=', endpoint.id).execute();
    assert.deepEqual(left, [], 'the deliveries went with the endpoint');
    const jobs = await ctx.app.deps.db.selectFrom('jobs').select('id').where('id', '=', delivery.id).execute();
    assert.deepEqual(jobs, [], 'and so did the job');
  }

  test('a failed attempt (which starts the endpoint failing clock) waiting for its delivery row', async () => {
    await deleteWhileSettling(500, (id) => sql`select id from deliveries where id = ${id} for update`);
  });

  test('a successful attempt waiting for its job row', async () => {
    await deleteWhileSettling(200, (id) => sql`select id from jobs where id = ${id} for update`);
  });
});
