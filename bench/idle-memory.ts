// npm run bench:idle-memory — issue 42: the resident memory (the kernel's VmRSS) of a started service on SQLite,
// idle, beside a bare Fastify process measured in the same run. Each start: `node src/server.ts` on a fresh SQLite
// file, /healthz answered, SETTLE_MS idle, VmRSS read, stopped; the bare process (bench/bare.child.ts) likewise,
// alternating. Median of STARTS each. The target is for a start on the simulated provider (the default where no
// Docker engine answers: MACHINE_PROVIDER=auto); BENCH_IDLE_DOCKER=1 measures the Docker provider too (an engine
// must be up, with the machine image).
// BENCH_IDLE_DETAIL=1 prints, for one more start of the service, what it holds: V8's figures, the modules
// loaded (by package) and where its heap goes (a heap snapshot's biggest constructors by retained size is
// `node --heapsnapshot-signal=SIGUSR2 src/server.ts`, then a look in Chrome's DevTools; this says which files).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/support/service-process.ts';
import { rssOf, sleep, startChild } from './support.ts';

const STARTS = Number(process.env.BENCH_IDLE_STARTS ?? 3);
/** Idle after /healthz: long enough for start-up's garbage to be collected and V8's memory reducer to run once. */
const SETTLE_MS = Number(process.env.BENCH_IDLE_SETTLE_SECONDS ?? 5) * 1000;
const TARGET_BYTES = 150 * 1000 * 1000;
const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url));
const PRELOAD = fileURLToPath(new URL('./idle-memory.preload.ts', import.meta.url));
const BARE = fileURLToPath(new URL('./bare.child.ts', import.meta.url));

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

interface Started {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/** The real service as `npm start` runs it, on a fresh SQLite file; resolves once /healthz answers. */
async function startService(env: Record<string, string>, nodeOptions: string[] = []): Promise<Started> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-idle-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [...nodeOptions, SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: `sqlite:${join(dir, 'service.db')}`,
      MAIL_DIR: join(dir, 'mail'),
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: url,
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}: ${stderr}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the service did not start: ${stderr}`);
    await sleep(50);
  }
  return {
    child,
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function idleRss(start: () => Promise<{ pid: number; stop(): Promise<void> }>): Promise<number> {
  const started = await start();
  await sleep(SETTLE_MS);
  const rss = rssOf(started.pid);
  await started.stop();
  return rss;
}

const service = (env: Record<string, string>) => async () => {
  const started = await startService(env);
  return { pid: started.child.pid!, stop: started.stop };
};
const bare = async () => {
  const child = await startChild(BARE);
  return { pid: child.process.pid!, stop: child.stop };
};

async function measure(label: string, env: Record<string, string>): Promise<{ service: number; bare: number }> {
  const ours: number[] = [];
  const baseline: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    baseline.push(await idleRss(bare));
    ours.push(await idleRss(service(env)));
  }
  const result = { service: median(ours), bare: median(baseline) };
  console.log(`  ${label}: ${ours.map(mb).join(', ')} (median ${mb(result.service)}); bare Fastify ${baseline.map(mb).join(', ')} (median ${mb(result.bare)}); ${(result.service / result.bare).toFixed(2)}× the bare process`);
  return result;
}

/** One more start with the preload: what the idle service holds, by V8's count and by the modules it loaded. */
async function detail(env: Record<string, string>): Promise<void> {
  const out = join(await mkdtemp(join(tmpdir(), 'bench-idle-detail-')), 'detail.json');
  const started = await startService({ ...env, BENCH_IDLE_DETAIL_FILE: out }, ['--import', PRELOAD]);
  await sleep(SETTLE_MS);
  const rss = rssOf(started.child.pid!);
  started.child.kill('SIGUSR2');
  let report: { memory: NodeJS.MemoryUsage; heapSpaces: Array<{ space_name: string; space_used_size: number; space_size: number }>; threads: string[]; modules: string[] } | undefined;
  for (let i = 0; i < 100 && report === undefined; i++) {
    await sleep(100);
    report = await readFile(out, 'utf8').then((text) => JSON.parse(text), () => undefined);
  }
  await started.stop();
  if (report === undefined) throw new Error('the preload wrote no report');
  const { memory } = report;
  console.log(`  detail (one more start, with the preload): VmRSS ${mb(rss)}; V8 heap used ${mb(memory.heapUsed)} of ${mb(memory.heapTotal)}; external ${mb(memory.external)} (array buffers ${mb(memory.arrayBuffers)}); threads: ${report.threads.join(', ')}`);
  console.log(`    heap spaces (used of committed): ${report.heapSpaces.filter((space) => space.space_size > 0).map((space) => `${space.space_name} ${mb(space.space_used_size)}/${mb(space.space_size)}`).join(', ')}`);
  const byPackage = new Map<string, number>();
  for (const url of report.modules) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    const key = match ? match[1]! : url.startsWith('node:') ? 'node: built-ins' : url.includes('/src/') ? 'src (ours)' : 'other';
    byPackage.set(key, (byPackage.get(key) ?? 0) + 1);
  }
  const rows = [...byPackage].sort((a, b) => b[1] - a[1]);
  console.log(`    ${report.modules.length} modules loaded, ${rows.length - 3} packages: ${rows.map(([name, count]) => `${name} ${count}`).join(', ')}`);
}

console.log(`bench/idle-memory: VmRSS ${SETTLE_MS / 1000} s after /healthz answers, ${STARTS} starts each, alternating with a bare Fastify process`);
// Named, not left to auto: on a host where an engine answers, auto would take Docker.
const simulated = await measure('service, SQLite, simulated machines (the default where no engine answers)', { MACHINE_PROVIDER: 'simulated' });
console.log(`  target: the service's median ≤ ${mb(TARGET_BYTES)}: ${simulated.service <= TARGET_BYTES ? 'PASS' : 'ABOVE TARGET'}`);
if (process.env.BENCH_IDLE_DOCKER === '1') await measure('service, SQLite, MACHINE_PROVIDER=docker', { MACHINE_PROVIDER: 'docker', ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}) });
if (process.env.BENCH_IDLE_DETAIL === '1') await detail({ MACHINE_PROVIDER: 'simulated' });
