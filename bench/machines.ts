// npm run bench:machines — machines as Docker containers, through the real service (MACHINE_PROVIDER=docker):
// create → running, a command through the service against the engine's own exec of it, 30 machines at once,
// and screens (bench/screens.ts). Skipped, saying why, where there is no Docker engine with the machine image.
// Set DATABASE_URL=postgres://… for PostgreSQL, BENCH_ONLY=boot,commands,many,screens for some parts only.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { loadConfig } from '../src/config.ts';
import { containerName, containerSpec } from '../src/machines/docker/container-spec.ts';
import { DEFAULT_SCREEN } from '../src/machines/screen-size.ts';
import { execIn } from '../src/machines/docker/exec.ts';
import { EGRESS_NETWORK } from '../src/machines/docker/network.ts';
import { RUN_SCRIPT } from '../src/machines/docker/run-script.ts';
import { newId } from '../src/shared/ids.ts';
import { dockerUnavailable, removeMachineContainers } from '../test/support/docker.ts';
import type { Mark } from './machines.child.ts';
import { screenFigures } from './screens.ts';
import { epochNow, percentile, postgresSchema, sleep, startChild, type Child } from './support.ts';

const SEQUENTIAL = Number(process.env.BENCH_MACHINES ?? 20);
const AT_ONCE = 5;
const MANY = Number(process.env.BENCH_MANY_MACHINES ?? 30);
const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const TRACED = 7;
const COMMANDS = { 'echo hello': 'echo hello', 'uname, ls /usr/bin counted': 'uname -a; ls /usr/bin | wc -l' };
const POLL_MS = 10;
const RUN_POLL_MS = 5;
const TARGET_BOOT_P50_MS = 1500;
const TARGET_RATIO = 1.2;
const PARTS = process.env.BENCH_ONLY?.split(',') ?? ['boot', 'commands', 'many', 'screens'];

const skipped = await dockerUnavailable();
if (skipped) {
  console.log(`bench:machines skipped: ${skipped}`);
  process.exit(0);
}

const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const pgSchema = databaseUrl ? await postgresSchema(databaseUrl) : undefined;
const docker = new Docker();
const machines = loadConfig({ ...process.env, MACHINE_PROVIDER: 'docker' }).machines;
/** Every machine the service was asked for and every container the bench made itself: all removed at the end. */
const created: string[] = [];

console.log(`bench/machines on ${databaseUrl ? 'PostgreSQL' : 'SQLite'}: image ${machines.image}, ${RUNS} runs of each command by each way`);
const service: Child = await startChild(new URL('./machines.child.ts', import.meta.url).pathname, {
  MACHINE_PROVIDER: 'docker',
  BILLING: 'off',
  RATE_LIMIT: 'off',
  ...(pgSchema ? { BENCH_SCHEMA: pgSchema.schema } : {}),
});
const base = `http://127.0.0.1:${service.ready.port}`;

async function call<T = Record<string, unknown>>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: T }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { origin: base, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: (text === '' ? {} : JSON.parse(text)) as T };
}

/** A user with an API key, as one signs up: the key is what every request below carries. */
async function apiKey(): Promise<string> {
  const registered = await fetch(`${base}/api/auth/register`, {
    method: 'POST',
    headers: { origin: base, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'bench@example.com', password: 'correct horse battery', name: 'Bench' }),
  });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${await registered.text()}`);
  const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
  return (await call<{ key: string }>('POST', '/api/keys', { name: 'bench' }, { cookie })).json.key;
}

const auth = { authorization: `Bearer ${await apiKey()}` };
const api = <T = Record<string, unknown>>(method: string, path: string, body?: unknown) => call<T>(method, path, body, auth);

// ── create → running ────────────────────────────────────────────────────────────────────────────────

async function createMachine(name: string): Promise<string> {
  const answer = await api<{ id: string }>('POST', '/api/machines', { name });
  if (answer.status !== 201) throw new Error(`POST /api/machines: ${answer.status} ${JSON.stringify(answer.json)}`);
  created.push(answer.json.id);
  return answer.json.id;
}

/** Polls the account's running machines every POLL_MS (one request for all) until these are among them; answers when each was first seen. */
async function seenRunning(ids: string[], timeoutMs = 180_000): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  const deadline = performance.now() + timeoutMs;
  while (seen.size < ids.length) {
    const page = await api<{ data: Array<{ id: string }> }>('GET', '/api/machines?status=running&limit=100');
    const at = performance.now();
    for (const { id } of page.json.data) if (ids.includes(id) && !seen.has(id)) seen.set(id, at);
    if (seen.size === ids.length) break;
    if (at > deadline) throw new Error(`${ids.length - seen.size} of ${ids.length} machines not running after ${timeoutMs} ms`);
    await sleep(POLL_MS);
  }
  return seen;
}

/** Creates `count` machines at once; answers each one's time from its POST to the poll that saw it running. */
async function bootTimes(count: number, prefix: string): Promise<number[]> {
  const started = performance.now();
  const ids = await Promise.all(Array.from({ length: count }, (_, i) => createMachine(`${prefix}-${i}`)));
  const seen = await seenRunning(ids);
  return ids.map((id) => seen.get(id)! - started);
}

async function destroyAll(ids: string[]): Promise<void> {
  await Promise.all(ids.map(async (id) => {
    const answer = await api('DELETE', `/api/machines/${id}`);
    if (answer.status !== 200) throw new Error(`DELETE ${id}: ${answer.status} ${JSON.stringify(answer.json)}`);
  }));
}

/** The engine alone, the service's container settings: create and start, as the service's boot does. */
async function engineBootMs(): Promise<number> {
  const id = newId('mch');
  created.push(id);
  const settings = { image: machines.image, size: machines.sizes.small ?? Object.values(machines.sizes)[0]!, network: EGRESS_NETWORK.name, nameserver: null, limitDisk: false };
  const started = performance.now();
  const container = await docker.createContainer(containerSpec({ id, name: 'bench-engine', size: 'small', labels: {}, status: 'starting', statusChangedAt: Date.now(), screen: DEFAULT_SCREEN }, settings));
  await container.start();
  const ms = performance.now() - started;
  await container.remove({ force: true, v: true });
  return ms;
}

// ── one command, five ways ──────────────────────────────────────────────────────────────────────────

type Way = 'mcp run_command' | 'POST /runs + poll' | 'dockerode exec' | 'docker exec CLI' | 'run script alone';
const WAYS: Way[] = ['mcp run_command', 'POST /runs + poll', 'dockerode exec', 'docker exec CLI', 'run script alone'];
const BASELINE: Way = 'dockerode exec';

const MCP_HEADERS = { ...auth, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

/** Each way answers the command's stdout, to check that all of them ran it. */
const ways: Record<Way, (machineId: string, command: string) => Promise<string>> = {
  async 'mcp run_command'(machineId, command) {
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command } } };
    const answer = await call<{ result?: { structuredContent?: { stdout: string; status: string } } }>('POST', `/api/machines/${machineId}/mcp`, body, MCP_HEADERS);
    const run = answer.json.result?.structuredContent;
    if (run?.status !== 'succeeded') throw new Error(`run_command: ${answer.status} ${JSON.stringify(answer.json)}`);
    return run.stdout;
  },
  async 'POST /runs + poll'(machineId, command) {
    const queued = await api<{ id: string }>('POST', `/api/machines/${machineId}/runs`, { command });
    if (queued.status !== 201) throw new Error(`POST /runs: ${queued.status} ${JSON.stringify(queued.json)}`);
    for (;;) {
      const run = (await api<{ status: string; stdout: string }>('GET', `/api/runs/${queued.json.id}`)).json;
      if (run.status === 'succeeded') return run.stdout;
      if (run.status === 'failed') throw new Error(`run failed: ${JSON.stringify(run)}`);
      await sleep(RUN_POLL_MS);
    }
  },
  async 'dockerode exec'(machineId, command) {
    const exec = await docker.getContainer(containerName(machineId)).exec({ Cmd: ['/bin/sh', '-c', command], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise((resolve, reject) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', reject);
    });
    const { ExitCode } = await exec.inspect();
    if (ExitCode !== 0) throw new Error(`dockerode exec: exit code ${ExitCode}`);
    return stdoutOf(Buffer.concat(chunks));
  },
  async 'docker exec CLI'(machineId, command) {
    return (await promisify(execFile)('docker', ['exec', containerName(machineId), '/bin/sh', '-c', command])).stdout;
  },
  // The service's own exec (its script, under a new run id), without the service: what its run path costs beyond it.
  async 'run script alone'(machineId, command) {
    const { stdout } = await execIn(docker.getContainer(containerName(machineId)), ['/bin/sh', '-c', RUN_SCRIPT, 'mp-run', newId('run'), '600', '/root', command]);
    const header = stdout.subarray(0, stdout.indexOf(10)).toString().split(' ');
    return stdout.subarray(stdout.indexOf(10) + 1, stdout.indexOf(10) + 1 + Number(header[3])).toString();
  },
};

/** The engine's multiplexed stream, stdout frames only (8-byte headers: stream 1 is stdout). */
function stdoutOf(multiplexed: Buffer): string {
  const parts: Buffer[] = [];
  for (let at = 0; at + 8 <= multiplexed.length; at += 8 + multiplexed.readUInt32BE(at + 4)) {
    if (multiplexed[at] === 1) parts.push(multiplexed.subarray(at + 8, at + 8 + multiplexed.readUInt32BE(at + 4)));
  }
  return Buffer.concat(parts).toString();
}

async function timed(way: Way, machineId: string, command: string, expected?: string): Promise<number> {
  const started = performance.now();
  const stdout = await ways[way](machineId, command);
  const ms = performance.now() - started;
  if (expected !== undefined && stdout !== expected) throw new Error(`${way}: stdout ${JSON.stringify(stdout)}, expected ${JSON.stringify(expected)}`);
  return ms;
}

/** RUNS of each way, interleaved, the order turning each round so that no way always follows the same one. */
async function commandTimes(machineId: string, command: string): Promise<Record<Way, number[]>> {
  const expected = await ways['docker exec CLI'](machineId, command);
  for (const way of WAYS) await timed(way, machineId, command, expected); // warm-up: JIT, connections, statement caches
  const times = Object.fromEntries(WAYS.map((way) => [way, [] as number[]])) as Record<Way, number[]>;
  for (let round = 0; round < RUNS; round++) {
    for (let i = 0; i < WAYS.length; i++) {
      const way = WAYS[(round + i) % WAYS.length]!;
      times[way].push(await timed(way, machineId, command, expected));
    }
  }
  return times;
}

// ── where a run's time goes in the service ──────────────────────────────────────────────────────────

interface Phases {
  total: number;
  [phase: string]: number;
}

/** One traced run through a way, cut into phases by the service's marks (see machines.child.ts). */
async function tracedRun(way: 'mcp run_command' | 'POST /runs + poll', machineId: string, command: string): Promise<Phases> {
  await service.request({ cmd: 'trace-on' });
  const sent = epochNow();
  await ways[way](machineId, command);
  const received = epochNow();
  const { marks } = await service.request<{ marks: Mark[] }>({ cmd: 'trace-off' });
  const first = (prefix: string) => marks.find((m) => m.what.startsWith(prefix))!;
  const httpIn = first('http in POST');
  const called = first('provider.runCommand called');
  const execCreate = first('engine POST /containers/{container}/exec');
  const execStart = first('engine POST /exec/{exec}/start');
  const returned = first('provider.runCommand returned');
  // MCP: the tool call's answer; runs: the poll that saw the run finished.
  const answered = marks.findLast((m) => m.what.startsWith('http answered'))!;
  const sqlBetween = (from: Mark, to: Mark) =>
    marks.filter((m) => m.what.startsWith('sql') && !m.what.includes('data_version') && m.at >= from.at && m.at < to.at).reduce((sum, m) => sum + m.ms!, 0);
  return {
    total: received - sent,
    'client → request in': httpIn.at - sent,
    'request in → provider called': called.at - httpIn.at,
    // SQLite's statements only: the service's PostgreSQL queries are not traced.
    ...(databaseUrl ? {} : { '  of which SQL': sqlBetween(httpIn, called) }),
    'exec create (engine)': execCreate.at + execCreate.ms! - called.at,
    'exec start → output read': returned.at - execStart.at,
    'provider returned → answer': answered.at - returned.at,
    ...(databaseUrl ? {} : { '  of which SQL ': sqlBetween(returned, answered) }),
    'answer → client': received - answered.at,
  };
}

/** One traced create → running: the engine's calls of the machine's boot, and what comes between them. */
async function tracedBoot(): Promise<Phases> {
  await service.request({ cmd: 'trace-on' });
  const sent = epochNow();
  const id = await createMachine('traced');
  await seenRunning([id]);
  const received = epochNow();
  const { marks } = await service.request<{ marks: Mark[] }>({ cmd: 'trace-off' });
  await destroyAll([id]);
  const answered = marks.find((m) => m.what.startsWith('http answered'))!;
  // The boot's calls end with the start; later ones are the engine's event of it, looked at.
  const engine = marks.filter((m) => m.what.startsWith('engine'));
  const calls = engine.slice(0, engine.findIndex((m) => m.what.endsWith('/start')) + 1);
  const phases: Phases = { total: received - sent, 'POST /api/machines answered (201)': answered.at - sent, '201 → first engine call': calls[0]!.at - answered.at };
  for (const call of calls) {
    const name = call.what.replace('engine ', '');
    phases[name] = (phases[name] ?? 0) + call.ms!;
  }
  phases['gaps between engine calls'] = calls.at(-1)!.at + calls.at(-1)!.ms! - calls[0]!.at - calls.reduce((sum, call) => sum + call.ms!, 0);
  phases['start answered → seen running'] = received - (calls.at(-1)!.at + calls.at(-1)!.ms!);
  return phases;
}

function medianPhases(traces: Phases[]): Phases {
  return Object.fromEntries(Object.keys(traces[0]!).map((phase) => [phase, percentile(traces.map((t) => t[phase] ?? 0), 50)])) as Phases;
}

function printPhases(title: string, phases: Phases): void {
  console.log(`  where ${title}, ${ms(phases.total)} in all) goes:`);
  for (const [phase, value] of Object.entries(phases)) if (phase !== 'total') console.log(`    ${phase.padEnd(40)} ${ms(value).padStart(8)}`);
}

// ── memory ──────────────────────────────────────────────────────────────────────────────────────────

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
function serviceRssFromProc(): number {
  const line = readFileSync(`/proc/${service.process.pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.replace(/\D+/g, '')) * 1024;
}
const serviceMemory = () => service.request<NodeJS.MemoryUsage>({ cmd: 'memory' });

// ── the run ─────────────────────────────────────────────────────────────────────────────────────────

const ms = (value: number) => `${value.toFixed(value < 100 ? 1 : 0)} ms`;
const bootLine = (values: number[]) => `p50 ${ms(percentile(values, 50))}, p99 ${ms(percentile(values, 99))}`;
const summary: string[] = [];
try {
  if (PARTS.includes('boot')) {
    // create → running, one after the other (each destroyed before the next), then AT_ONCE at once.
    await bootTimes(1, 'warm-up');
    await destroyAll(created.slice(-1));
    const sequential: number[] = [];
    const engine: number[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) {
      sequential.push(...(await bootTimes(1, `one-${i}`)));
      await destroyAll(created.slice(-1));
      if (i % 2 === 0) engine.push(await engineBootMs());
    }
    const atOnce = await bootTimes(AT_ONCE, 'five');
    await destroyAll(created.slice(-AT_ONCE));
    console.log(`  create → running, ${SEQUENTIAL} one after the other: ${bootLine(sequential)} (target p50 ≤ ${TARGET_BOOT_P50_MS} ms) ${percentile(sequential, 50) <= TARGET_BOOT_P50_MS ? 'PASS' : 'MISSED'}`);
    console.log(`  create → running, ${AT_ONCE} at once: ${bootLine(atOnce)}`);
    console.log(`  the engine alone, create + start with the same settings (${engine.length}, between those in turn): ${bootLine(engine)}; the service's p50 is ${(percentile(sequential, 50) / percentile(engine, 50)).toFixed(2)}× its p50`);
    const boots: Phases[] = [];
    for (let i = 0; i < TRACED; i++) boots.push(await tracedBoot());
    printPhases(`create → running (median of ${TRACED} traced boots`, medianPhases(boots));
    summary.push(`| create → running, ${SEQUENTIAL} in turn | ${bootLine(sequential)} | p50 ≤ ${TARGET_BOOT_P50_MS} ms |`);
    summary.push(`| create → running, ${AT_ONCE} at once | ${bootLine(atOnce)} | |`);
    summary.push(`| engine create + start alone | ${bootLine(engine)} (service ${(percentile(sequential, 50) / percentile(engine, 50)).toFixed(2)}×) | |`);
  }
  if (PARTS.includes('commands')) {
    // One command, five ways, on one machine.
    const runner = await createMachine('runner');
    await seenRunning([runner]);
    for (const [label, command] of Object.entries(COMMANDS)) {
      const times = await commandTimes(runner, command);
      const baseline = percentile(times[BASELINE], 50);
      console.log(`  \`${command}\` (${RUNS} each, interleaved):`);
      for (const way of WAYS) {
        const p50 = percentile(times[way], 50);
        const ratio = p50 / baseline;
        const verdict = way === 'mcp run_command' || way === 'POST /runs + poll' ? ` (target ≤ ${TARGET_RATIO}×) ${ratio <= TARGET_RATIO ? 'PASS' : 'MISSED'}` : '';
        // A second or more: the run script's bimodal case (see bench/RESULTS.md, bench:machines).
        const slow = times[way].filter((time) => time >= 1000).length;
        console.log(`    ${way.padEnd(18)} p50 ${ms(p50).padStart(8)}, p99 ${ms(percentile(times[way], 99)).padStart(8)}, ${String(slow).padStart(2)} of ${RUNS} ≥ 1 s; ${ratio.toFixed(2)}× ${BASELINE}${verdict}`);
        summary.push(`| ${label}: ${way} | p50 ${ms(p50)}, p99 ${ms(percentile(times[way], 99))}, ${slow}/${RUNS} ≥ 1 s, ${ratio.toFixed(2)}× | ${way === BASELINE ? 'baseline' : verdict.includes('target') ? `≤ ${TARGET_RATIO}×` : ''} |`);
      }
    }
    // Where the service's time goes: a few runs traced, the median of each phase.
    for (const way of ['mcp run_command', 'POST /runs + poll'] as const) {
      const traces: Phases[] = [];
      for (let i = 0; i < TRACED; i++) traces.push(await tracedRun(way, runner, COMMANDS['echo hello']));
      printPhases(`\`echo hello\` through ${way} (median of ${TRACED} traced runs`, medianPhases(traces));
    }
    await destroyAll([runner]);
  }
  if (PARTS.includes('many')) {
    // MANY machines at once: the time until all run, and the service's memory meanwhile.
    const idleRss = serviceRssFromProc();
    let peakRss = idleRss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, serviceRssFromProc())), 50);
    const started = performance.now();
    const many = await bootTimes(MANY, 'many');
    const allRunningMs = performance.now() - started;
    const memory = await serviceMemory();
    clearInterval(sampler);
    const destroyStarted = performance.now();
    await destroyAll(created.slice(-MANY));
    const destroyMs = performance.now() - destroyStarted;
    console.log(`  ${MANY} machines at once: all running after ${ms(allRunningMs)} (each: ${bootLine(many)}); destroyed in ${ms(destroyMs)}`);
    console.log(`    service rss ${mb(idleRss)} MB before, ${mb(memory.rss)} MB with ${MANY} running (/proc: ${mb(serviceRssFromProc())} MB; peak ${mb(peakRss)} MB), heap used ${mb(memory.heapUsed)} MB`);
    summary.push(`| ${MANY} at once: all running | ${ms(allRunningMs)} (each ${bootLine(many)}) | |`);
    summary.push(`| ${MANY} at once: service RSS | ${mb(idleRss)} MB before, ${mb(memory.rss)} MB running, peak ${mb(peakRss)} MB | |`);
  }
  if (PARTS.includes('screens')) summary.push(...(await screenFigures({ docker, service, base, auth, mcpHeaders: MCP_HEADERS, api, createMachine, seenRunning, destroyAll })));
  console.log(`\n| | measured | target |\n|---|---|---|\n${summary.join('\n')}`);
} finally {
  await service.stop();
  await removeMachineContainers(created);
  await pgSchema?.drop();
}
