import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { inTransaction } from '../../src/db/transaction.ts';
import { exponentialBackoff } from '../../src/jobs/backoff.ts';
import { jobType, type Job, type JobKind, type Outcome } from '../../src/jobs/job-kind.ts';
import { lanedJobType, type LanedJobKind, type LanedJobType } from '../../src/jobs/laned-kind.ts';
import { ensureRecurring, recurringKind, type Recurring } from '../../src/jobs/recurring.ts';
import { createRunner, DEFAULT_RUNNER_OPTIONS } from '../../src/jobs/runner.ts';
import { createTestApp, type TestContext } from '../support/app.ts';
import { manualClock } from '../support/clock.ts';

/** A kind whose attempts the test scripts: each answers the next outcome of `script` (then done), and is recorded; `lanedKind`, the same as a laned kind. */
function scriptedKind(name: string, options: { concurrency?: number; leaseMs?: number; retry?: (failures: number) => number | null } = {}) {
  const type = jobType<{ n: number }>(name);
  const attempts: Array<{ id: string; n: number; attempts: number; at: number }> = [];
  const script: Outcome[] = [];
  let hold: Promise<void> | null = null;
  let inFlight = 0;
  let maxInFlight = 0;
  async function perform(job: Job<{ n: number }>): Promise<Outcome> {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      attempts.push({ id: job.id, n: job.payload.n, attempts: job.attempts, at: Date.now() });
      if (hold) await hold;
      return script.shift() ?? { status: 'done' };
    } finally {
      inFlight -= 1;
    }
  }
  const plain: JobKind<{ n: number }> = {
    type,
    concurrency: options.concurrency ?? 4,
    leaseMs: options.leaseMs ?? 10_000,
    retryDelay: options.retry ?? ((failures) => (failures >= 3 ? null : 1000 * failures)),
    perform,
  };
  const lanedType: LanedJobType<{ n: number }, Job<{ n: number }>> = lanedJobType(name);
  const lanedKind: LanedJobKind<{ n: number }, Job<{ n: number }>, Outcome> = {
    ...plain,
    type: lanedType,
    admit: () => ({ limit: 2, hold: 0, notBefore: 0 }),
    load: async (jobs) => jobs,
    perform: (job) => perform(job),
    outcomeOf: (outcome) => outcome,
  };
  return {
    type,
    kind: plain,
    lanedType,
    lanedKind,
    attempts,
    script,
    maxInFlight: () => maxInFlight,
    /** Attempts wait until the returned function is called. */
    stall(): () => void {
      let open!: () => void;
      hold = new Promise<void>((resolve) => (open = resolve));
      return () => {
        hold = null;
        open();
      };
    },
  };
}

const jobsOf = (ctx: TestContext, kind: string) => ctx.app.deps.db.selectFrom('jobs').selectAll().where('kind', '=', kind).orderBy('id').execute();

describe('the jobs module', () => {
  let ctx: TestContext;
  const basic = scriptedKind('test.basic');
  const retried = scriptedKind('test.retried');
  const limited = scriptedKind('test.limited', { concurrency: 2 });
  const laned = scriptedKind('test.laned');
  const recurring = scriptedKind('test.recurring');
  /** Runs of `ticking` (at their clock time), and what each of the next runs does: fail, name its next time, or neither. */
  const ticks: number[] = [];
  const tickScript: Array<'fail' | number | undefined> = [];
  const ticking: Recurring = {
    type: jobType<Record<string, never>>('test.ticking'),
    intervalMs: 10_000,
    firstRetryMs: 1000,
    async run() {
      ticks.push(ctx.clock.now());
      const next = tickScript.shift();
      if (next === 'fail') throw new Error('down');
      return next;
    },
  };

  before(async () => {
    ctx = await createTestApp({
      setup: (app) => {
        for (const { kind } of [basic, retried, limited, recurring]) app.jobs.register(kind);
        app.jobs.registerLaned(laned.lanedKind);
        app.jobs.register(recurringKind(app.deps.clock, ticking));
      },
    });
  });
  after(() => ctx.close());

  const enqueue = (type: ReturnType<typeof jobType<{ n: number }>>, jobs: Array<{ n: number; runAt?: number }>) =>
    inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.enqueue(tx, type, jobs.map(({ n, runAt }) => ({ payload: { n }, ...(runAt ? { runAt } : {}) }))));
  const enqueueInLane = (type: LanedJobType<{ n: number }, Job<{ n: number }>>, jobs: Array<{ n: number; lane: string }>) =>
    inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.enqueueInLane(tx, type, jobs.map(({ n, lane }) => ({ payload: { n }, lane }))));

  test('a job enqueued in a transaction exists only if it commits; once it does, it runs once and is gone', async () => {
    await assert.rejects(
      inTransaction(ctx.app.deps.database, async (tx) => {
        await ctx.app.deps.jobs.enqueue(tx, basic.type, [{ payload: { n: 1 } }]);
        throw new Error('the change failed');
      }),
      /the change failed/,
    );
    await ctx.app.jobs.drain();
    assert.equal(basic.attempts.length, 0, 'rolled back with the change');
    await enqueue(basic.type, [{ n: 2 }]);
    await ctx.app.jobs.drain();
    assert.deepEqual(basic.attempts.map((a) => a.n), [2]);
    assert.deepEqual(await jobsOf(ctx, 'test.basic'), []);
  });

  test("a failed attempt is retried by the kind's policy, on the clock, until the policy gives up", async () => {
    retried.script.push({ status: 'failed', error: 'one' }, { status: 'failed', error: 'two' }, { status: 'failed', error: 'three' });
    await enqueue(retried.type, [{ n: 1 }]);
    await ctx.app.jobs.drain();
    let [job] = await jobsOf(ctx, 'test.retried');
    assert.deepEqual([job?.attempts, job?.run_at, job?.last_error, job?.locked_by], [1, ctx.clock.now() + 1000, 'one', null]);
    ctx.clock.advance(999);
    await ctx.app.jobs.drain();
    assert.equal(retried.attempts.length, 1, 'not before its time');
    ctx.clock.advance(1);
    await ctx.app.jobs.drain();
    [job] = await jobsOf(ctx, 'test.retried');
    assert.deepEqual([job?.attempts, job?.run_at, job?.last_error], [2, ctx.clock.now() + 2000, 'two']);
    ctx.clock.advance(2000);
    await ctx.app.jobs.drain();
    assert.deepEqual(retried.attempts.map((a) => a.attempts), [0, 1, 2], 'each attempt knows the failures before it');
    assert.deepEqual(await jobsOf(ctx, 'test.retried'), [], 'the policy gave up after the third failure');
  });

  test('a kind runs at most its concurrency at once in a process; the rest wait their turn', async () => {
    const open = limited.stall();
    await enqueue(limited.type, [1, 2, 3, 4, 5].map((n) => ({ n })));
    const draining = ctx.app.jobs.drain();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(limited.attempts.length, 2, `two in flight, three waiting (${JSON.stringify(limited.attempts)})`);
    open();
    await draining;
    assert.deepEqual(limited.attempts.map((a) => a.n).sort(), [1, 2, 3, 4, 5]);
    assert.equal(limited.maxInFlight(), 2);
  });

  test("a paused lane's jobs wait, unclaimed, and go when it resumes; a closed lane's jobs are cancelled", async () => {
    await inTransaction(ctx.app.deps.database, async (tx) => {
      await ctx.app.deps.jobs.openLane(tx, 'lane-a', { paused: true });
      await ctx.app.deps.jobs.openLane(tx, 'lane-b', { paused: false });
    });
    await enqueueInLane(laned.lanedType, [{ n: 1, lane: 'lane-a' }, { n: 2, lane: 'lane-a' }, { n: 3, lane: 'lane-b' }]);
    await ctx.app.jobs.drain();
    assert.deepEqual(laned.attempts.map((a) => a.n), [3], 'only the open lane');
    assert.deepEqual((await jobsOf(ctx, 'test.laned')).map((job) => job.locked_by), [null, null], 'the paused ones are not even leased');
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.resumeLane(tx, 'lane-a'));
    await ctx.app.jobs.drain();
    assert.deepEqual(laned.attempts.map((a) => a.n).sort(), [1, 2, 3]);

    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.pauseLane(tx, 'lane-b'));
    await enqueueInLane(laned.lanedType, [{ n: 4, lane: 'lane-b' }]);
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.closeLane(tx, 'lane-b'));
    await ctx.app.jobs.drain();
    assert.deepEqual(await jobsOf(ctx, 'test.laned'), [], 'cancelled with its lane');
    assert.equal(laned.attempts.length, 3);
  });

  test('a recurring job is one for all processes, runs every interval, and a failing run is retried with backoff up to the interval, never given up', async () => {
    const start = ctx.clock.now();
    // Every process makes sure of it at start: still one job, due an interval on.
    for (let process = 0; process < 2; process++) await inTransaction(ctx.app.deps.database, (tx) => ensureRecurring(ctx.app.deps.jobs, tx, ctx.clock, ticking));
    const dueAt = async () => {
      const jobs = await jobsOf(ctx, 'test.ticking');
      assert.equal(jobs.length, 1);
      return jobs[0]!.run_at - ctx.clock.now();
    };
    assert.equal(await dueAt(), 10_000);
    ctx.clock.advance(9_999);
    await ctx.app.jobs.drain();
    assert.deepEqual(ticks, [], 'not before its time');
    ctx.clock.advance(1);
    await ctx.app.jobs.drain();
    assert.deepEqual(ticks, [start + 10_000]);
    assert.equal(await dueAt(), 10_000, 'the next run an interval after this one');

    tickScript.push('fail', 'fail', 'fail', 'fail', 'fail', 'fail');
    const delays: number[] = [];
    for (let delay = 10_000; ticks.length < 8; delay = await dueAt()) {
      ctx.clock.advance(delay);
      await ctx.app.jobs.drain();
      delays.push(await dueAt());
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 10_000, 10_000, 10_000], 'doubling from the first retry, at most the interval; the last run succeeded');
    assert.equal((await jobsOf(ctx, 'test.ticking'))[0]!.attempts, 0, 'a run that succeeds clears the failures');

    tickScript.push(ctx.clock.now() + 10_000 + 500);
    ctx.clock.advance(10_000);
    await ctx.app.jobs.drain();
    assert.equal(await dueAt(), 500, 'a run may name its next time');
  });

  test('a job for a subject is one job: scheduling it again moves it, ensuring it leaves it be, cancelling removes it', async () => {
    const at = ctx.clock.now();
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.schedule(tx, recurring.type, 's1', { n: 1 }, at + 60_000));
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.schedule(tx, recurring.type, 's1', { n: 2 }, at + 30_000));
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.ensure(tx, recurring.type, 's1', { n: 3 }, at + 10_000));
    const [job] = await jobsOf(ctx, 'test.recurring');
    assert.deepEqual([job?.key, job?.run_at, JSON.parse(job!.payload)], ['test.recurring:s1', at + 30_000, { n: 2 }]);
    assert.equal((await jobsOf(ctx, 'test.recurring')).length, 1);

    recurring.script.push({ status: 'later', at: at + 90_000 });
    ctx.clock.advance(30_000);
    await ctx.app.jobs.drain();
    assert.deepEqual(recurring.attempts.map((a) => a.n), [2]);
    assert.equal((await jobsOf(ctx, 'test.recurring'))[0]?.run_at, at + 90_000, '"later" keeps it, for its next time');

    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.cancel(tx, recurring.type, 's1'));
    ctx.clock.advance(60_000);
    await ctx.app.jobs.drain();
    assert.equal(recurring.attempts.length, 1);
    assert.deepEqual(await jobsOf(ctx, 'test.recurring'), []);
  });

  test('a job for a subject scheduled again while an attempt of it runs: that attempt\'s outcome is not applied, in the same process either', async () => {
    // Regression (seen in billing's balance-empty stop): the attempt under way, ending after the same process had
    // claimed the rescheduled job, deleted it, because the lease check only asked which process held it.
    const rescheduled = scriptedKind('test.rescheduled');
    const app = await createTestApp({ setup: (a) => a.jobs.register(rescheduled.kind) });
    const open = rescheduled.stall();
    try {
      const waitForAttempts = async (count: number) => {
        for (let i = 0; i < 500 && rescheduled.attempts.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        assert.equal(rescheduled.attempts.length, count, `${count} attempts under way`);
      };
      const at = app.clock.now();
      await inTransaction(app.app.deps.database, (tx) => app.app.deps.jobs.schedule(tx, rescheduled.type, 'subject', { n: 1 }, at));
      await waitForAttempts(1);
      await inTransaction(app.app.deps.database, (tx) => app.app.deps.jobs.schedule(tx, rescheduled.type, 'subject', { n: 2 }, at));
      await waitForAttempts(2);
      // The first attempt ends first and says done; the second, of the job as scheduled now, asks to run again later.
      rescheduled.script.push({ status: 'done' }, { status: 'later', at: at + 60_000 });
      open();
      await app.app.jobs.drain();
      assert.deepEqual(rescheduled.attempts.map((a) => a.n), [1, 2]);
      const jobs = await jobsOf(app, 'test.rescheduled');
      assert.deepEqual(jobs.map((job) => [job.run_at, JSON.parse(job.payload), job.locked_by]), [[at + 60_000, { n: 2 }, null]], 'the job as scheduled last, kept for its next run');
    } finally {
      open();
      await app.close();
    }
  });

  test('a job due now starts at once in the process that enqueued it, leased to it in the same insert: no poll, no claim', async () => {
    const handed = scriptedKind('test.handover');
    const app = await createTestApp({ buildOptions: { runnerOptions: { pollIntervalMs: 3_600_000 } }, setup: (a) => a.jobs.register(handed.kind) });
    try {
      const open = handed.stall();
      await inTransaction(app.app.deps.database, (tx) => app.app.deps.jobs.enqueue(tx, handed.type, [{ payload: { n: 1 } }]));
      for (let i = 0; i < 100 && handed.attempts.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
      assert.equal(handed.attempts.length, 1, 'started without waiting for a poll (the next one is an hour away)');
      const [job] = await jobsOf(app, 'test.handover');
      assert.ok(job?.locked_by !== null && job?.locked_until === app.clock.now() + handed.kind.leaseMs!, 'inserted already leased to this process');
      open();
      await app.app.jobs.drain();
      assert.deepEqual(await jobsOf(app, 'test.handover'), []);
    } finally {
      await app.close();
    }
  });
});

describe('jobs across processes: leases', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { ROLE: 'api' } });
  });
  after(() => ctx.close());

  test("a process that dies holding a job keeps it until its lease runs out; then another takes it over, and its attempt is not counted", async () => {
    const kind = scriptedKind('test.leased', { leaseMs: 30_000 });
    const { database, db, logger } = ctx.app.deps;
    const clock = ctx.clock;
    // The dying process's own clock never moves: its heartbeat, which would renew the lease, never comes.
    const dying = createRunner({ database, db, clock: manualClock(clock.now()), logger }, { ...DEFAULT_RUNNER_OPTIONS, pollIntervalMs: 3_600_000 });
    const successor = createRunner({ database, db, clock, logger }, { ...DEFAULT_RUNNER_OPTIONS, pollIntervalMs: 3_600_000 });
    const stalled = scriptedKind('test.leased', { leaseMs: 30_000 });
    dying.register(stalled.kind);
    successor.register(kind.kind);
    const release = stalled.stall();
    dying.start();
    try {
      await inTransaction(database, (tx) => ctx.app.deps.jobs.enqueue(tx, kind.type, [{ payload: { n: 7 } }]));
      dying.wake();
      for (let i = 0; i < 500 && stalled.attempts.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(stalled.attempts.length, 1, 'the first process took it, and hangs');
      // Started only now: its first poll, at start, could otherwise take the job before the first process does.
      successor.start();
      const [held] = await db.selectFrom('jobs').selectAll().where('kind', '=', 'test.leased').execute();
      assert.equal(held?.locked_by, dying.id);
      assert.equal(held?.locked_until, clock.now() + 30_000);

      clock.advance(29_999);
      await successor.drain();
      assert.equal(kind.attempts.length, 0, 'not while the lease holds');
      clock.advance(2);
      await successor.drain();
      assert.deepEqual(kind.attempts.map((a) => [a.n, a.attempts]), [[7, 0]], 'taken over, its attempts as they were');
      assert.deepEqual(await db.selectFrom('jobs').selectAll().where('kind', '=', 'test.leased').execute(), []);
    } finally {
      await successor.stop(0);
      release();
      await dying.stop(0);
    }
  });
});

describe('jobs: a settled attempt is not attempted again', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { ROLE: 'api' } });
  });
  after(() => ctx.close());

  // Regression: a job left the runner's hands when its attempt ended, before its settlement was written; a lease that ran out meanwhile let a poll claim and send it again.
  test('a job whose attempt has ended stays held, its lease renewed, until its settlement is written', async () => {
    const kind = scriptedKind('test.slow-settle', { leaseMs: 3000 });
    const { database, db, logger } = ctx.app.deps;
    // Settlements written 1.5 s (real time) after the attempt: the clock moves past the lease meanwhile.
    const runner = createRunner({ database, db, clock: ctx.clock, logger }, { pollIntervalMs: 500, settleBatchMs: 1500 });
    runner.register(kind.kind);
    runner.start();
    try {
      await inTransaction(database, (tx) => ctx.app.deps.jobs.enqueue(tx, kind.type, [{ payload: { n: 1 } }]));
      runner.wake();
      for (let i = 0; i < 500 && kind.attempts.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(kind.attempts.length, 1);
      for (let step = 0; step < 10; step++) {
        ctx.clock.advance(1000);
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
      assert.equal(kind.attempts.length, 1, 'ten seconds on the clock, three leases: never attempted twice');
      await runner.drain();
      assert.equal(kind.attempts.length, 1);
      assert.deepEqual(await jobsOf(ctx, 'test.slow-settle'), [], 'settled at last');
    } finally {
      await runner.stop(0);
    }
  });
});

describe('jobs: an attempt lets go of a job it may no longer hold', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { ROLE: 'api' } });
  });
  after(() => ctx.close());

  /** A kind whose one attempt waits until its signal aborts, and records why. */
  function abortableKind(name: string) {
    const type = jobType<{ n: number }>(name);
    const seen: { started: boolean; reason: string | null } = { started: false, reason: null };
    const kind: JobKind<{ n: number }> = {
      type,
      concurrency: 1,
      leaseMs: 8000,
      retryDelay: () => null,
      perform: (_job, signal) =>
        new Promise<Outcome>((resolve) => {
          seen.started = true;
          signal.addEventListener('abort', () => {
            seen.reason = (signal.reason as Error).message;
            resolve({ status: 'release' });
          });
        }),
    };
    return { type, kind, seen };
  }

  async function startHolding(name: string, db: typeof ctx.app.deps.db) {
    const { type, kind, seen } = abortableKind(name);
    const clock = manualClock(ctx.clock.now());
    const runner = createRunner({ database: ctx.app.deps.database, db, clock, logger: ctx.app.deps.logger }, { ...DEFAULT_RUNNER_OPTIONS, pollIntervalMs: 3_600_000 });
    runner.register(kind);
    runner.start();
    await inTransaction(ctx.app.deps.database, (tx) => ctx.app.deps.jobs.enqueue(tx, type, [{ payload: { n: 1 } }]));
    runner.wake();
    for (let i = 0; i < 500 && !seen.started; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(seen.started);
    return { runner, clock, seen };
  }

  const heartbeats = async (clock: ReturnType<typeof manualClock>, count: number) => {
    for (let i = 0; i < count; i++) {
      clock.advance(2000);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
  };

  test('a job another process holds now (taken over after a stall): its attempt here is aborted at the next heartbeat', async () => {
    const { runner, clock, seen } = await startHolding('test.taken', ctx.app.deps.db);
    try {
      await heartbeats(clock, 2);
      assert.equal(seen.reason, null, 'renewed: held');
      await ctx.app.deps.db.updateTable('jobs').set({ locked_by: 'elsewhere/1/0000' }).where('kind', '=', 'test.taken').execute();
      await heartbeats(clock, 1);
      assert.match(String(seen.reason), /no longer holds the job/);
    } finally {
      await runner.stop(0);
    }
  });

  test('a lease the heartbeat cannot renew: the attempt is aborted before the lease runs out, never after', async () => {
    let failing = false;
    const db = new Proxy(ctx.app.deps.db, {
      get(target, property) {
        if (property === 'updateTable' && failing) return () => { throw new Error('the database is out of reach'); };
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const { runner, clock, seen } = await startHolding('test.unrenewed', db);
    try {
      const [job] = await jobsOf(ctx, 'test.unrenewed');
      failing = true;
      await heartbeats(clock, 2);
      assert.equal(seen.reason, null, 'four seconds of its lease left, two heartbeats to go: it goes on');
      await heartbeats(clock, 1);
      assert.match(String(seen.reason), /could not renew its lease/);
      assert.ok(clock.now() < job!.locked_until!, 'aborted while its lease still held');
    } finally {
      failing = false;
      await runner.stop(0);
    }
  });
});

test('exponentialBackoff doubles from the first delay, caps at the longest, and gives up after its attempts', () => {
  const delay = exponentialBackoff({ firstMs: 5000, maxMs: 60_000, attempts: 6 });
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(delay), [5000, 10_000, 20_000, 40_000, 60_000, null, null]);
});
