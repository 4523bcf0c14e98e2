// npm run bench:delivery — deliveries per second against raw signed POSTs, latency at 500 events/s,
// and a dead receiver with 100,000 pending deliveries. Set DATABASE_URL=postgres://… for PostgreSQL,
// BENCH_ONLY=throughput,latency,dead for some parts only.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher } from 'undici';
import { connectDatabase } from '../src/db/connect.ts';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { emitEvent } from '../src/event-webhooks/outbox.ts';
import { insertDeliveries, newDeliveryRow } from '../src/event-webhooks/deliveries.repository.ts';
import { deliveryJob } from '../src/event-webhooks/delivery.job.ts';
import { createEndpoint } from '../src/event-webhooks/endpoints.service.ts';
import { deliveryHeaders } from '../src/event-webhooks/signing.ts';
import { newId } from '../src/shared/ids.ts';
import { cpuMicros, epochNow, percentile, postgresCpuMicros, postgresSchema, ratioLine, sleep, startChild, type Child } from './support.ts';

const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const onPostgres = databaseUrl !== undefined;
const engine = databaseUrl ? 'PostgreSQL' : 'SQLite';
const ENDPOINTS = 4;
const PER_ENDPOINT_CONCURRENCY = 16;
const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000);
const PARTS = process.env.BENCH_ONLY?.split(',') ?? ['throughput', 'latency', 'dead'];
const EMITTERS = databaseUrl ? 16 : 4;
// Issue 10's targets: the levels reached before the jobs redesign.
const data = { machine: { id: 'mch_01jdbench', name: 'bench', status: 'running', size: 'small', externalId: 'ext', labels: { team: 'bench' } }, detail: {} };

const receiver = await startChild(new URL('./receiver.child.ts', import.meta.url).pathname);
const receiverUrl = `https://127.0.0.1:${receiver.ready.port}/hook`;

async function receiverCount(): Promise<number> {
  return (await receiver.request<{ count: number }>({ cmd: 'stats' })).count;
}

async function waitForCount(expected: number, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await receiverCount()) < expected) {
    if (Date.now() > deadline) throw new Error(`receiver got ${await receiverCount()} of ${expected}`);
    await sleep(5);
  }
}

/**
 * The ceiling: signed POSTs of the same envelopes, straight from an undici pool with the worker's
 * connection count, through `request()` (undici's usual API, as the issue names it) or through the
 * lower-level `dispatch()` that the worker's sender uses, which skips the response stream.
 */
async function rawPostsPerSecond(total: number, via: 'request' | 'dispatch') {
  const connections = ENDPOINTS * PER_ENDPOINT_CONCURRENCY;
  const agent = new Agent({ connections, pipelining: 1, allowH2: false });
  const secret = 'whsec_6bbH1MfDvNCyOW4ZnDFG2kFy3GyQ0Wv0C3sRN5tk3E0=';
  const target = new URL(receiverUrl);
  await receiver.request({ cmd: 'reset' });
  let sent = 0;
  const cpu = cpuMeter();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (sent < total) {
        sent += 1;
        const body = JSON.stringify({ id: newId('evt'), type: 'machine.created', createdAt: new Date().toISOString(), data });
        const options = { origin: target.origin, path: target.pathname, method: 'POST' as const, headers: deliveryHeaders(secret, body, 'machine.created', newId('dlv'), Date.now()), body };
        if (via === 'request') await (await agent.request(options)).body.text();
        else await dispatchPost(agent, options);
      }
    }),
  );
  const rate = total / ((performance.now() - started) / 1000);
  const cpuPerPost = cpu.perItem(total);
  await agent.close();
  return { rate, cpu: cpuPerPost };
}

function dispatchPost(agent: Agent, options: Dispatcher.DispatchOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    agent.dispatch(options, { onRequestStart: () => {}, onResponseStart: () => {}, onResponseData: () => {}, onResponseEnd: () => resolve(), onResponseError: (_controller, error) => reject(error) });
  });
}

interface BenchService {
  app: App;
  accountId: string;
  databaseUrl: string;
  schema: string | undefined;
  close(): Promise<void>;
  drop(): Promise<void>;
}

// The speed switches pass through, so a run can measure the service with one of them off.
const speedSwitches = Object.fromEntries(
  ['PG_PREPARED_STATEMENTS', 'WEBHOOK_SENDER_THREAD'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
);

async function startService(env: Record<string, string> = {}): Promise<BenchService> {
  const pgSchema = databaseUrl ? await postgresSchema(databaseUrl) : null;
  const dir = await mkdtemp(join(tmpdir(), 'bench-delivery-'));
  const serviceDatabaseUrl = databaseUrl ?? `sqlite:${join(dir, 'service.db')}`;
  const config = loadConfig({
    DATABASE_URL: serviceDatabaseUrl,
    MAIL_DIR: join(dir, 'mail'),
    LOG_LEVEL: 'silent',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
    MACHINE_PROVIDER: 'simulated',
    ...speedSwitches,
    ...env,
  });
  const app = await buildApp(config, { logger: false, ...(pgSchema ? { databaseSchema: pgSchema.schema } : {}) });
  await app.ready();
  const accountId = newId('acct');
  await app.deps.db.insertInto('accounts').values({ id: accountId, email: `${accountId}@bench.test`, name: 'bench', password_hash: 'x', email_verified_at: null, created_at: Date.now(), updated_at: Date.now() }).execute();
  return {
    app,
    accountId,
    databaseUrl: serviceDatabaseUrl,
    schema: pgSchema?.schema,
    close: async () => {
      await app.close();
      await pgSchema?.drop();
    },
    drop: async () => {
      await pgSchema?.drop();
    },
  };
}

function emit(app: App, accountId: string, type: 'machine.created' | 'machine.error') {
  return inTransaction(app.deps.database, (tx) => emitEvent(app.deps, tx, { accountId, type, data }));
}

/**
 * CPU time per item of this process (all its threads), the receiver's and, on PostgreSQL, the
 * database server's: figures the noise of a shared machine moves less than the rates.
 */
function cpuMeter(withDatabase = false) {
  const ours = cpuMicros();
  const theirs = cpuMicros(receiver.process.pid);
  const database = withDatabase ? postgresCpuMicros() : 0;
  return {
    perItem: (count: number) => ({
      ours: (cpuMicros() - ours) / count,
      receiver: (cpuMicros(receiver.process.pid) - theirs) / count,
      database: withDatabase ? (postgresCpuMicros() - database) / count : undefined,
    }),
  };
}

/**
 * A running service's rate: each round starts a new service and first has it deliver as many events untimed,
 * so what is timed is a service once warm (its code compiled and optimised, its connections open), as the
 * ceiling's best round is, not a start-up. Without it, the rounds favoured code run on this process's thread,
 * which the ceiling and the round before had warmed, over a thread of the service's own (WEBHOOK_SENDER_THREAD),
 * new and cold in each round.
 */
async function pipelineDeliveriesPerSecond(total: number) {
  const service = await startService();
  for (let i = 0; i < ENDPOINTS; i++) await createEndpoint(service.app.deps, service.accountId, { url: receiverUrl, events: ['machine.created'] });
  await emitAndDeliver(service, total);
  const cpu = cpuMeter(onPostgres);
  const started = performance.now();
  await emitAndDeliver(service, total);
  const rate = (total * ENDPOINTS) / ((performance.now() - started) / 1000);
  const cpuPerDelivery = cpu.perItem(total * ENDPOINTS);
  await service.close();
  return { rate, cpu: cpuPerDelivery };
}

async function emitAndDeliver(service: BenchService, total: number): Promise<void> {
  await receiver.request({ cmd: 'reset' });
  let emitted = 0;
  await Promise.all(
    Array.from({ length: EMITTERS }, async () => {
      while (emitted < total) {
        emitted += 1;
        await emit(service.app, service.accountId, 'machine.created');
      }
    }),
  );
  await waitForCount(total * ENDPOINTS);
}

async function latencyAt(eventsPerSecond: number, seconds: number, service: { app: App; accountId: string }, type: 'machine.created' = 'machine.created') {
  await receiver.request({ cmd: 'reset' });
  await receiver.request({ cmd: 'record' });
  const emittedAt = new Map<string, number>();
  /** How long each emit's own transaction took: what the database and its pool add, apart from the delivery. */
  const committed: number[] = [];
  const total = eventsPerSecond * seconds;
  const interval = 1000 / eventsPerSecond;
  const started = performance.now();
  const inFlight: Array<Promise<unknown>> = [];
  for (let i = 0; i < total; i++) {
    const due = started + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    const at = epochNow();
    inFlight.push(
      emit(service.app, service.accountId, type).then((event) => {
        emittedAt.set(event.id, at);
        committed.push(epochNow() - at);
      }),
    );
  }
  await Promise.all(inFlight);
  await waitForCount(total);
  const { receipts } = await receiver.request<{ receipts: Array<[string, number]> }>({ cmd: 'stats' });
  const latencies = receipts.filter(([id]) => emittedAt.has(id)).map(([id, at]) => at - emittedAt.get(id)!);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), count: latencies.length, commitP99: percentile(committed, 99) };
}

/** 100,000 deliveries pending for a dead receiver, written in bulk (setup, not measured). */
async function seedDeadBacklog(app: App, accountId: string, endpointId: string, count: number): Promise<void> {
  const now = Date.now();
  for (let offset = 0; offset < count; offset += 1000) {
    const events = Array.from({ length: Math.min(1000, count - offset) }, () => {
      const envelope = { id: newId('evt'), type: 'machine.error', createdAt: new Date(now).toISOString(), data };
      return envelope;
    });
    await inTransaction(app.deps.database, async (tx) => {
      await tx.db.insertInto('events').values(events.map((e) => ({ id: e.id, account_id: accountId, type: e.type, payload: JSON.stringify(e), created_at: now }))).execute();
      const deliveries = events.map((e) => newDeliveryRow(now, accountId, endpointId, e));
      await insertDeliveries(tx.db, deliveries);
      await app.deps.jobs.enqueueInLane(tx, deliveryJob, deliveries.map((d) => ({ id: d.id, payload: {}, lane: endpointId })));
    });
  }
}

/**
 * The backlog is written first, by this process; then the service runs in its own process on that
 * database, so its memory is its own (not the seeding's), while another endpoint gets events.
 */
async function deadReceiverScenario() {
  const seeded = await startService({ ROLE: 'api' });
  const { app, accountId } = seeded;
  const dead = await createEndpoint(app.deps, accountId, { url: 'https://127.0.0.1:9/dead', events: ['machine.error'] });
  await createEndpoint(app.deps, accountId, { url: receiverUrl, events: ['machine.created'] });
  await seedDeadBacklog(app, accountId, dead.id, 100_000);
  await app.close();

  const service = await startChild(new URL('./service.child.ts', import.meta.url).pathname, {
    DATABASE_URL: seeded.databaseUrl,
    ...(seeded.schema ? { BENCH_SCHEMA: seeded.schema } : {}),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
  });
  const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${service.process.pid}/status`, 'utf8'))![1]) / 1024;
  let maxRss = rssMb();
  const sampler = setInterval(() => (maxRss = Math.max(maxRss, rssMb())), 50);

  await receiver.request({ cmd: 'reset' });
  await receiver.request({ cmd: 'record' });
  const emittedAt = new Map<string, number>();
  const started = performance.now();
  for (let i = 0; i < 500; i++) {
    const wait = started + i * 20 - performance.now();
    if (wait > 1) await sleep(wait);
    const { id, at } = await service.request<{ id: string; at: number }>({ cmd: 'emit', accountId, type: 'machine.created' });
    emittedAt.set(id, at);
  }
  await waitForCount(500);
  clearInterval(sampler);
  maxRss = Math.max(maxRss, rssMb());
  const { receipts } = await receiver.request<{ receipts: Array<[string, number]> }>({ cmd: 'stats' });
  const latencies = receipts.filter(([id]) => emittedAt.has(id)).map(([id, at]) => at - emittedAt.get(id)!);
  await service.stop();

  const db = connectDatabase(seeded.databaseUrl, seeded.schema ? { schema: seeded.schema } : {}).db;
  const attempted = await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<number | string>().as('n')).where('endpoint_id', '=', dead.id).where('attempts', '>', 0).executeTakeFirstOrThrow();
  const unsent = await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<number | string>().as('n')).where('endpoint_id', '=', dead.id).where('last_error', 'like', 'not sent:%').executeTakeFirstOrThrow();
  await db.destroy();
  await seeded.drop();
  return { maxRssMb: maxRss, latency: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) }, deadAttempted: Number(attempted.n), deadUnsent: Number(unsent.n) };
}

console.log(`bench/delivery on ${engine}: ${EVENTS} events × ${ENDPOINTS} endpoints, ${EMITTERS} concurrent emitters`);
type Run = Awaited<ReturnType<typeof rawPostsPerSecond>>;
if (PARTS.includes('throughput')) {
  const requestCeilings: Run[] = [];
  const dispatchCeilings: Run[] = [];
  const pipelines: Run[] = [];
  for (let round = 0; round < 2; round++) {
    requestCeilings.push(await rawPostsPerSecond(EVENTS * ENDPOINTS, 'request'));
    dispatchCeilings.push(await rawPostsPerSecond(EVENTS * ENDPOINTS, 'dispatch'));
    pipelines.push(await pipelineDeliveriesPerSecond(EVENTS));
  }
  const best = (runs: Run[]) => Math.max(...runs.map((run) => run.rate));
  const rates = (runs: Run[]) => runs.map((run) => Math.round(run.rate)).join(', ');
  const cpuLine = (runs: Run[]) =>
    runs.map(({ cpu }) => [cpu.ours, cpu.receiver, ...(cpu.database === undefined ? [] : [cpu.database])].map((us) => us.toFixed(0)).join(' + ')).join(', ');
  const connections = ENDPOINTS * PER_ENDPOINT_CONCURRENCY;
  console.log(`  raw signed POSTs, undici request() (${connections} connections): ${rates(requestCeilings)} /s`);
  console.log(`    CPU µs per POST (this process + receiver): ${cpuLine(requestCeilings)}`);
  console.log(`  raw signed POSTs, undici dispatch() (${connections} connections): ${rates(dispatchCeilings)} /s`);
  console.log(`    CPU µs per POST (this process + receiver): ${cpuLine(dispatchCeilings)}`);
  console.log(`  events → deliveries (outbox, worker, receipt): ${rates(pipelines)} /s`);
  console.log(`    CPU µs per delivery (service + receiver${onPostgres ? ' + PostgreSQL' : ''}): ${cpuLine(pipelines)}`);
  console.log(`  ${ratioLine('deliveries per second', best(pipelines), best(requestCeilings))}`);
  console.log(`    against the dispatch() POSTs instead (the sender's own API; no target): ${(best(pipelines) / best(dispatchCeilings)).toFixed(2)}`);
}

if (PARTS.includes('latency')) {
  const latencyService = await startService();
  await createEndpoint(latencyService.app.deps, latencyService.accountId, { url: receiverUrl, events: ['machine.created'] });
  // The first seconds of a service just started are slower (JIT, and on PostgreSQL each new backend's caches):
  // at 500 events/s its emits queue for a second or so. Shown apart; the target is the service warm.
  const cold = await latencyAt(500, 10, latencyService);
  const latency = await latencyAt(500, 10, latencyService);
  await latencyService.close();
  const latencyOk = latency.p50 <= 10 && latency.p99 <= 20;
  console.log(`  at 500 events/s for 10 s: event-to-receipt p50 ${latency.p50.toFixed(1)} ms, p99 ${latency.p99.toFixed(1)} ms (targets ≤ 10, ≤ 20) ${latencyOk ? 'PASS' : 'BELOW TARGET'}; the emit's commit p99 ${latency.commitP99.toFixed(1)} ms`);
  console.log(`    the 10 s before, from the service's start: p50 ${cold.p50.toFixed(1)} ms, p99 ${cold.p99.toFixed(1)} ms; the emit's commit p99 ${cold.commitP99.toFixed(1)} ms`);
}

if (PARTS.includes('dead')) {
  const dead = await deadReceiverScenario();
  const deadOk = dead.maxRssMb < 300 && dead.latency.p99 <= 100;
  console.log(`  100,000 pending for a dead receiver: max RSS ${dead.maxRssMb.toFixed(0)} MB (target < 300); ${dead.deadAttempted} had their first attempt meanwhile,`);
  console.log(`    ${dead.deadAttempted - dead.deadUnsent} of them over a connection and ${dead.deadUnsent} failed without one (the endpoint failing);`);
  console.log(`    another endpoint at 50 events/s meanwhile: p50 ${dead.latency.p50.toFixed(1)} ms, p99 ${dead.latency.p99.toFixed(1)} ms ${deadOk ? 'PASS' : 'BELOW TARGET'}`);
}

await receiver.stop();
