// npm run bench:retention — retention pruning old delivery rows while deliveries go on (CONTRACT 13, issue 12).
// BENCH_RETENTION_ROWS (default 5,000,000) old delivered rows are written in bulk (setup, not measured), then
// deliveries run at full speed, in windows alternating without and with the retention job pruning; the
// delivery rate during pruning is printed as a ratio to the rate without. Set DATABASE_URL=postgres://… for PostgreSQL.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { dialectOf } from '../src/db/connect.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { emitEvent } from '../src/event-webhooks/outbox.ts';
import { createEndpoint } from '../src/event-webhooks/endpoints.service.ts';
import { idBoundAt, newId } from '../src/shared/ids.ts';
import { postgresSchema, sleep, startChild } from './support.ts';

const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const engine = databaseUrl ? 'PostgreSQL' : 'SQLite';
const ROWS = Number(process.env.BENCH_RETENTION_ROWS ?? 5_000_000);
/** Deliveries per old event: one to each of ten endpoints, as an account with ten endpoints would have. */
const FAN_OUT = 10;
const ENDPOINTS = 4;
const EMITTERS = databaseUrl ? 16 : 4;
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DAY = 86_400_000;
const TARGET = 0.8;
const data = { machine: { id: 'mch_01jdbench', name: 'bench', status: 'running', size: 'small', externalId: 'ext', labels: { team: 'bench' } }, detail: {} };

const receiver = await startChild(new URL('./receiver.child.ts', import.meta.url).pathname);
const receiverUrl = `https://127.0.0.1:${receiver.ready.port}/hook`;
const receiverCount = async () => (await receiver.request<{ count: number }>({ cmd: 'stats' })).count;

const pgSchema = databaseUrl ? await postgresSchema(databaseUrl) : null;
const dir = await mkdtemp(join(tmpdir(), 'bench-retention-'));
const config = loadConfig({
  DATABASE_URL: databaseUrl ?? `sqlite:${join(dir, 'service.db')}`,
  MAIL_DIR: join(dir, 'mail'),
  LOG_LEVEL: 'silent',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
  RATE_LIMIT: 'off',
  MACHINE_PROVIDER: 'simulated',
});
const app: App = await buildApp(config, { logger: false, ...(pgSchema ? { databaseSchema: pgSchema.schema } : {}) });
await app.ready();
const { database, db } = app.deps;

async function newAccount(): Promise<string> {
  const id = newId('acct');
  await db.insertInto('accounts').values({ id, email: `${id}@bench.test`, name: 'bench', password_hash: 'x', email_verified_at: null, created_at: Date.now(), updated_at: Date.now() }).execute();
  return id;
}

/** ROWS delivered deliveries 40 days old (ROWS / FAN_OUT events, each to ten endpoints), written by set-based statements. */
async function seedOldRows(): Promise<number> {
  const started = performance.now();
  const accountId = await newAccount();
  const endpointIds: string[] = [];
  for (let i = 0; i < FAN_OUT; i++) endpointIds.push((await createEndpoint(app.deps, accountId, { url: `${receiverUrl}/old${i}`, events: ['machine.stopped'] })).id);
  const old = Date.now() - 40 * DAY;
  // Ids made 40 days ago: the time prefix of a real id, then a counter (sorted like real ids, older than the cutoff).
  const evtPrefix = idBoundAt('evt', old).slice(0, 14);
  const dlvPrefix = idBoundAt('dlv', old).slice(0, 14);
  const events = Math.ceil(ROWS / FAN_OUT);
  const chunk = 100_000;
  const payload = JSON.stringify({ id: 'evt_old', type: 'machine.stopped', createdAt: new Date(old).toISOString(), data });
  for (let from = 0; from < events; from += chunk) {
    const to = Math.min(events, from + chunk) - 1;
    await inTransaction(database, async (tx) => {
      if (dialectOf(db) === 'postgres') {
        await sql`insert into events (id, account_id, type, payload, created_at)
          select ${evtPrefix} || lpad(i::text, 16, '0'), ${accountId}, 'machine.stopped', ${payload}, ${old}::bigint from generate_series(${from}::int, ${to}::int) as i`.execute(tx.db);
        for (let e = 0; e < FAN_OUT; e++) {
          await sql`insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, last_status, last_body, last_error, last_duration_ms, last_attempt_at, created_at)
            select ${dlvPrefix} || lpad(i::text, 15, '0') || ${String(e)}, ${accountId}, ${endpointIds[e]}, ${evtPrefix} || lpad(i::text, 16, '0'), 'machine.stopped', 'delivered', 1, null, 200, 'ok', null, 12, ${old}::bigint, ${old}::bigint
            from generate_series(${from}::int, ${to}::int) as i`.execute(tx.db);
        }
      } else {
        await sql`with recursive n(i) as (select ${from} union all select i + 1 from n where i < ${to})
          insert into events (id, account_id, type, payload, created_at) select ${evtPrefix} || printf('%016d', i), ${accountId}, 'machine.stopped', ${payload}, ${old} from n`.execute(tx.db);
        for (let e = 0; e < FAN_OUT; e++) {
          await sql`with recursive n(i) as (select ${from} union all select i + 1 from n where i < ${to})
            insert into deliveries (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, last_status, last_body, last_error, last_duration_ms, last_attempt_at, created_at)
            select ${dlvPrefix} || printf('%015d', i) || ${String(e)}, ${accountId}, ${endpointIds[e]}, ${evtPrefix} || printf('%016d', i), 'machine.stopped', 'delivered', 1, null, 200, 'ok', null, 12, ${old}, ${old} from n`.execute(tx.db);
        }
      }
    });
  }
  if (dialectOf(db) === 'postgres') await sql`analyze`.execute(db);
  return (performance.now() - started) / 1000;
}

const countRows = async (table: 'deliveries' | 'events') => Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow()).n);
/** Delivery rows older than RETENTION: the seeded ones not pruned yet. */
const countOld = async () =>
  Number((await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<number | string>().as('n')).where('id', '<', idBoundAt('dlv', Date.now() - 30 * DAY)).executeTakeFirstOrThrow()).n);

/** Retention off: its job moved far away (and a run under way loses its lease, so it does not reschedule itself). */
async function pausePruning(): Promise<void> {
  await db.updateTable('jobs').set({ run_at: Date.now() + 365 * DAY, locked_by: null, locked_until: null }).where('kind', '=', 'retention').execute();
}
async function resumePruning(): Promise<void> {
  await db.updateTable('jobs').set({ run_at: Date.now(), locked_by: null, locked_until: null }).where('kind', '=', 'retention').execute();
}

/** Deliveries per second received over one window of full-speed emitting. */
async function window(accountId: string): Promise<number> {
  const before = await receiverCount();
  const started = performance.now();
  let stop = false;
  const emitters = Array.from({ length: EMITTERS }, async () => {
    while (!stop) {
      await inTransaction(database, (tx) => emitEvent(app.deps, tx, { accountId, type: 'machine.created', data }));
      // SQLite's statements are synchronous: without a turn of the event loop, timers (the window's end) would never run.
      await new Promise((resolve) => setImmediate(resolve));
    }
  });
  await sleep(WINDOW_MS);
  stop = true;
  await Promise.all(emitters);
  const received = (await receiverCount()) - before;
  const rate = received / ((performance.now() - started) / 1000);
  await sleep(500); // the tail of the window's deliveries, before the next one starts
  return rate;
}

console.log(`bench/retention on ${engine}: ${ROWS.toLocaleString('en')} delivered deliveries 40 days old (${FAN_OUT} per event), RETENTION 30d`);
await pausePruning();
const seedSeconds = await seedOldRows();
const oldRows = await countRows('deliveries');
console.log(`  setup: ${oldRows.toLocaleString('en')} old delivery rows and ${(await countRows('events')).toLocaleString('en')} events written in ${seedSeconds.toFixed(0)} s`);

const live = await newAccount();
for (let i = 0; i < ENDPOINTS; i++) await createEndpoint(app.deps, live, { url: receiverUrl, events: ['machine.created'] });
await window(live); // warm-up

const without: number[] = [];
const during: number[] = [];
const pruned: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  await pausePruning();
  without.push(await window(live));
  const left = await countOld();
  await resumePruning();
  during.push(await window(live));
  pruned.push((left - (await countOld())) / (WINDOW_MS / 1000));
}
await pausePruning();
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
const ratio = mean(during) / mean(without);
console.log(`  deliveries per second without pruning: ${without.map((r) => r.toFixed(0)).join(', ')} (mean ${mean(without).toFixed(0)})`);
console.log(`  deliveries per second while pruning:   ${during.map((r) => r.toFixed(0)).join(', ')} (mean ${mean(during).toFixed(0)})`);
console.log(`  old rows deleted per second while delivering: ${pruned.map((r) => r.toFixed(0)).join(', ')}`);
console.log(`  delivery rate during pruning / without: ${ratio.toFixed(2)} (target ≥ ${TARGET}) ${ratio >= TARGET ? 'PASS' : 'BELOW TARGET'}`);

// The rest, at full speed with nothing else going on.
await resumePruning();
const restStarted = performance.now();
const restBefore = await countOld();
const deadline = Date.now() + Number(process.env.BENCH_PRUNE_REST_MS ?? 60_000);
while (Date.now() < deadline && (await db.selectFrom('deliveries').select('id').where('id', '<', idBoundAt('dlv', Date.now() - 30 * DAY)).limit(1).executeTakeFirst()) !== undefined) await sleep(1000);
const restSeconds = (performance.now() - restStarted) / 1000;
const restLeft = await countOld();
console.log(`  pruning alone: ${(restBefore - restLeft).toLocaleString('en')} old rows in ${restSeconds.toFixed(0)} s (${((restBefore - restLeft) / restSeconds).toFixed(0)} /s); ${restLeft.toLocaleString('en')} old delivery rows left`);

await app.close();
await pgSchema?.drop();
await receiver.stop();
