// The real service in its own process, on a fresh SQLite file (or the given Postgres schema).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { inTransaction } from '../src/db/transaction.ts';
import type { EventType } from '../src/events/event-types.ts';
import { emitEvent } from '../src/event-webhooks/outbox.ts';
import { freePort } from '../test/support/service-process.ts';

const dir = await mkdtemp(join(tmpdir(), 'bench-service-'));
// PUBLIC_URL must be the origin clients use, or the origin rule refuses their cookie requests.
const port = await freePort();
const config = loadConfig({
  // Simulated machines unless the bench asks for others: MACHINE_PROVIDER's default (auto) would take a Docker engine here.
  MACHINE_PROVIDER: 'simulated',
  ...process.env,
  DATABASE_URL: process.env.DATABASE_URL ?? `sqlite:${join(dir, 'service.db')}`,
  MAIL_DIR: join(dir, 'mail'),
  LOG_LEVEL: 'warn',
  PORT: String(port),
  PUBLIC_URL: `http://127.0.0.1:${port}`,
});
const app = await buildApp(config, process.env.BENCH_SCHEMA ? { databaseSchema: process.env.BENCH_SCHEMA } : {});
await app.listen({ port, host: '127.0.0.1' });
process.send!({ port });

// Benchmark harness only: emit an event inside this process, as a domain would, and say when.
process.on('message', (message: { cmd: string; accountId: string; type: EventType }) => {
  if (message.cmd === 'memory') return void process.send!(process.memoryUsage());
  if (message.cmd !== 'emit') return;
  const at = performance.timeOrigin + performance.now();
  void inTransaction(app.deps.database, (tx) => emitEvent(app.deps, tx, { accountId: message.accountId, type: message.type, data: {} }))
    .then((event) => process.send!({ id: event.id, at }));
});
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
