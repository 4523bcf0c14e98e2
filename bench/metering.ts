// npm run bench:metering — one metering pass over 10,000 running machines of 1,000 accounts, in one
// process: its time and the process's memory. Set DATABASE_URL=postgres://… for PostgreSQL.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { meteringPass } from '../src/billing/metering.ts';
import { loadConfig } from '../src/config.ts';
import { newId } from '../src/shared/ids.ts';
import { postgresSchema } from './support.ts';

const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const engine = databaseUrl ? 'PostgreSQL' : 'SQLite';
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 1000);
const MACHINES = Number(process.env.BENCH_MACHINES ?? 10_000);
const PASSES = 3;
const INTERVAL_MS = 60_000;
const TARGET_MS = 2000;
const TARGET_MB = 300;

const pgSchema = databaseUrl ? await postgresSchema(databaseUrl) : undefined;
const dir = await mkdtemp(join(tmpdir(), 'bench-metering-'));
const config = loadConfig({
  DATABASE_URL: databaseUrl ?? `sqlite:${join(dir, 'service.db')}`,
  MAIL_DIR: join(dir, 'mail'),
  // No runner: the passes below are the only metering, timed one by one.
  ROLE: 'api',
  BILLING: 'on',
  LOG_LEVEL: 'silent',
  MACHINE_PROVIDER: 'simulated',
});
const app = await buildApp(config, { logger: false, ...(pgSchema ? { databaseSchema: pgSchema.schema } : {}) });
await app.ready();
const { db } = app.deps;

const start = Date.now() - PASSES * INTERVAL_MS;
const accountIds = Array.from({ length: ACCOUNTS }, () => newId('acct', start));
const CHUNK = 500;
for (let i = 0; i < ACCOUNTS; i += CHUNK) {
  const ids = accountIds.slice(i, i + CHUNK);
  await db.insertInto('accounts').values(ids.map((id) => ({ id, email: `${id}@bench.test`, name: 'bench', password_hash: 'x', email_verified_at: start, created_at: start, updated_at: start }))).execute();
  await db
    .insertInto('billing_accounts')
    .values(ids.map((id) => ({ account_id: id, balance_micros: 1_000_000_000, welcome_granted_at: null, card_reference: null, card_brand: null, card_last4: null, card_exp_month: null, card_exp_year: null, card_created_at: null, created_at: start, updated_at: start })))
    .execute();
}
const sizes = ['small', 'medium', 'large'] as const;
for (let i = 0; i < MACHINES; i += CHUNK) {
  const batch = Array.from({ length: Math.min(CHUNK, MACHINES - i) }, (_, j) => {
    const n = i + j;
    return { id: newId('mch', start), accountId: accountIds[n % ACCOUNTS]!, size: sizes[n % 3]! };
  });
  await db
    .insertInto('machines')
    .values(batch.map((m) => ({
      id: m.id, account_id: m.accountId, name: `bench-${m.id.slice(-6)}`, size: m.size, external_id: '', labels: '{}', env_names: '[]', env_sealed: null, auto_stop_minutes: 0, last_active_at: null, image: 'default', status: 'running' as const,
      status_changed_at: start, version: 1, booted_at: start, pool_id: null, on_expire: 'stop' as const, expires_at: null, expired_at: null,
      mcp_token_hash: null, pending_action: null, pending_reason: null, lost_with_host: 0, created_at: start, updated_at: start,
    })))
    .execute();
  await db
    .insertInto('billing_meters')
    .values(batch.map((m) => ({
      machine_id: m.id, account_id: m.accountId, name: `bench-${m.id.slice(-6)}`, size: m.size,
      price_micros: config.billing.pricesMicrosPerHour[m.size]!, metered_until: start, metered_ms: 0, charged_micros: 0, updated_at: start,
    })))
    .execute();
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
console.log(`metering on ${engine}: ${MACHINES.toLocaleString('en')} running machines across ${ACCOUNTS.toLocaleString('en')} accounts, one process`);
let worst = 0;
let peakRss = process.memoryUsage().rss;
console.log(`  before the first pass (service and seeded data in memory): rss ${mb(peakRss)} MB, heap used ${mb(process.memoryUsage().heapUsed)} MB`);
for (let pass = 1; pass <= PASSES; pass++) {
  const now = start + pass * INTERVAL_MS;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 5);
  const began = performance.now();
  const charged = await meteringPass(app.deps, now);
  const ms = performance.now() - began;
  clearInterval(sampler);
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  worst = Math.max(worst, ms);
  const memory = process.memoryUsage();
  console.log(`  pass ${pass}: ${charged.toLocaleString('en')} machines charged in ${Math.round(ms)} ms; rss ${mb(memory.rss)} MB, heap used ${mb(memory.heapUsed)} MB`);
  if (charged !== MACHINES) throw new Error(`pass ${pass} charged ${charged} of ${MACHINES} machines`);
}
const entries = await db.selectFrom('billing_ledger').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
console.log(`  ${Number(entries.n).toLocaleString('en')} ledger entries written`);
console.log(`  slowest pass ${Math.round(worst)} ms (target < ${TARGET_MS} ms) ${worst < TARGET_MS ? 'ok' : 'MISSED'}; peak rss ${mb(peakRss)} MB (target < ${TARGET_MB} MB) ${mb(peakRss) < TARGET_MB ? 'ok' : 'MISSED'}`);
await app.close();
await pgSchema?.drop();
if (worst >= TARGET_MS || mb(peakRss) >= TARGET_MB) process.exitCode = 1;
