// The real service in its own process with MACHINE_PROVIDER=docker, for bench/machines.ts: a fresh SQLite
// file (or the given Postgres schema), and, on request, a timeline of what it does while a run goes through it:
// its requests in and out, the provider's runCommand, its requests to the machine's agent, the engine's calls and
// SQLite's statements.
import { mkdtemp } from 'node:fs/promises';
import http2 from 'node:http2';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { StatementSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import type { DockerProvider } from '../src/providers/docker/docker.provider.ts';
import { freePort } from '../test/support/service-process.ts';
import { epochNow } from './support.ts';

/** One thing the service did, at `at` (epoch ms, comparable with the bench's clock), taking `ms` when it is a call. */
export interface Mark {
  at: number;
  ms?: number;
  what: string;
}

const dir = await mkdtemp(join(tmpdir(), 'bench-machines-'));
const port = await freePort();
const config = loadConfig({
  ...process.env,
  DATABASE_URL: process.env.DATABASE_URL ?? `sqlite:${join(dir, 'service.db')}`,
  MAIL_DIR: join(dir, 'mail'),
  LOG_LEVEL: 'warn',
  PORT: String(port),
  PUBLIC_URL: `http://127.0.0.1:${port}`,
});
const app = await buildApp(config, process.env.BENCH_SCHEMA ? { databaseSchema: process.env.BENCH_SCHEMA } : {});

// The timeline: off unless asked for, so the other measurements run the service as it is.
let marks: Mark[] | null = null;
const mark = (what: string, at = epochNow(), ms?: number) => void marks?.push({ at, what, ...(ms === undefined ? {} : { ms }) });

app.addHook('onRequest', async (request) => mark(`http in ${request.method} ${request.url.replace(/\/api\/(machines|runs)\/[^/]+/, '/api/$1/{id}')}`));
app.addHook('onSend', async (_request, reply, payload) => {
  mark(`http answered ${reply.statusCode}`);
  return payload;
});

const provider = app.machineProvider as DockerProvider;
const runCommand = provider.runCommand.bind(provider);
provider.runCommand = async (machine, run, signal) => {
  mark('provider.runCommand called');
  try {
    return await runCommand(machine, run, signal);
  } finally {
    mark('provider.runCommand returned');
  }
};

// Every request to the engine: when it was sent and when its answer (for an exec's start: its stream) came.
const { modem } = provider.docker;
const dial = modem.dial.bind(modem);
modem.dial = (options, callback) => {
  if (marks === null) return dial(options, callback);
  const sent = epochNow();
  const what = `engine ${options.method} ${options.path.replace(/\?.*/, '').replace(/[0-9a-f]{64}/, '{exec}').replace(/machine-platform-[^/]+/, '{container}')}`;
  return dial(options, (error, result) => {
    mark(what, sent, epochNow() - sent);
    callback?.(error, result);
  });
};

// Every request to a machine's agent (HTTP/2 on the connection the provider keeps per machine): when it was sent,
// when its answer's headers came, its first bytes (a run's result line: a run without follow sends nothing before
// it) and its end. The stream's own push is wrapped, not listened to: a listener would take the bytes from the client.
const connect = http2.connect;
(http2 as { connect: typeof http2.connect }).connect = ((...args: Parameters<typeof http2.connect>) => {
  const session = connect(...args);
  const request = session.request.bind(session);
  session.request = (headers, options) => {
    const stream = request(headers, options);
    if (marks === null) return stream;
    const pseudo = headers as http2.OutgoingHttpHeaders;
    const what = `agent ${pseudo[':method']} ${String(pseudo[':path']).replace(/\?.*/, '')}`;
    mark(`${what} sent`);
    stream.once('response', () => mark(`${what} headers`));
    const push = stream.push.bind(stream);
    let first = true;
    stream.push = (chunk, encoding) => {
      if (chunk === null) mark(`${what} ended`);
      else if (first) mark(`${what} first bytes`);
      first = chunk === null ? first : false;
      return push(chunk, encoding);
    };
    return stream;
  };
  return session;
}) as typeof http2.connect;

// SQLite's statements, each with its time (the database work of a phase); PostgreSQL's are not traced.
for (const method of ['run', 'get', 'all'] as const) {
  const original = StatementSync.prototype[method] as (this: StatementSync, ...args: unknown[]) => unknown;
  (StatementSync.prototype as unknown as Record<string, unknown>)[method] = function (this: StatementSync, ...args: unknown[]) {
    if (marks === null) return original.apply(this, args);
    const started = epochNow();
    try {
      return original.apply(this, args);
    } finally {
      mark(`sql ${this.sourceSQL.replace(/\s+/g, ' ').slice(0, 60)}`, started, epochNow() - started);
    }
  };
}

await app.listen({ port, host: '127.0.0.1' });
process.send!({ port });

// How late the event loop ran its timers since the last ask (10 ms resolution), and the collector's pauses: what
// stalls every request at once.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
let gcPauses: number[] = [];
new PerformanceObserver((entries) => gcPauses.push(...entries.getEntries().map((entry) => entry.duration))).observe({ entryTypes: ['gc'] });

process.on('message', (message: { cmd: 'memory' | 'stalls' | 'trace-on' | 'trace-off' }) => {
  if (message.cmd === 'memory') return void process.send!(process.memoryUsage());
  if (message.cmd === 'stalls') {
    const answer = { loopDelayMaxMs: loopDelay.max / 1e6, loopDelayP99Ms: loopDelay.percentile(99) / 1e6, gcPausesOver20Ms: gcPauses.filter((ms) => ms > 20).length, gcPauseMaxMs: Math.max(0, ...gcPauses) };
    loopDelay.reset();
    gcPauses = [];
    return void process.send!(answer);
  }
  if (message.cmd === 'trace-on') {
    marks = [];
    return void process.send!({});
  }
  process.send!({ marks: marks ?? [] });
  marks = null;
});
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
