// npm run bench:machines — machines as Docker containers, through the real service (MACHINE_PROVIDER=docker),
// everything in a machine through its agent (agent/API.md), each figure beside what a user does without us (an
// engine-API exec, bench/engine-exec.ts): create → running; a command (`true`, and one with output) through the
// service's MCP endpoint and POST /runs, and by the agent alone; 30 machines at once; file reads, a process's
// output reaching a waiting reader and the agent's memory (bench/agent.ts); the service's memory through floods of
// bytes (bench/service-memory.ts); screens (bench/screens.ts); previews (bench/previews.ts); and a terminal's keystroke
// echo (bench/terminal.ts); a create from a template beside a plain one (bench/templates.ts); create → running placed over
// three hosts beside one host (bench/placement.ts). Skipped, saying why, where there is no Docker engine with the machine image or no agent
// binary (npm run agent). Set DATABASE_URL=postgres://… for PostgreSQL,
// BENCH_ONLY=boot,commands,agent,many,memory,screens,previews,terminal,templates,placement for some parts only.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { loadConfig } from '../src/config.ts';
import { containerName, containerSpec } from '../src/providers/docker/container-spec.ts';
import { DEFAULT_SCREEN } from '../src/providers/screen-size.ts';
import { agentConnections } from '../src/providers/docker/agent-connection.ts';
import { AGENT_BINARY } from '../src/providers/docker/agent-install.ts';
import { EGRESS_NETWORK } from '../src/providers/docker/network.ts';
import { newId } from '../src/shared/ids.ts';
import { dockerUnavailable, removeMachineContainers } from '../test/support/docker.ts';
import { agentFigures } from './agent.ts';
import { engineExec } from './engine-exec.ts';
import type { Mark } from './machines.child.ts';
import { ms, waysReport, type MachinesBench } from './machines-bench.ts';
import { previewFigures } from './previews.ts';
import { screenFigures } from './screens.ts';
import { terminalFigures } from './terminal.ts';
import { templateFigures } from './templates.ts';
import { placementFigures } from './placement.ts';
import { memoryFigures } from './service-memory.ts';
import { epochNow, interleavedTimes, percentile, postgresSchema, rssOf, sleep, startChild, type Child } from './support.ts';

const SEQUENTIAL = Number(process.env.BENCH_MACHINES ?? 20);
const AT_ONCE = 5;
const MANY = Number(process.env.BENCH_MANY_MACHINES ?? 30);
const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const TRACED = 7;
const COMMANDS = { true: 'true', 'uname, ls /usr/bin counted': 'uname -a; ls /usr/bin | wc -l' };
const POLL_MS = 10;
const RUN_POLL_MS = 5;
const TARGET_BOOT_P50_MS = 1500;
/** MCP run_command's p50 over the engine exec's. */
const TARGET_RATIO = 0.5;
const PARTS = process.env.BENCH_ONLY?.split(',') ?? ['boot', 'commands', 'agent', 'many', 'memory', 'screens', 'previews', 'terminal', 'templates', 'placement'];

const skipped = (await dockerUnavailable()) || (existsSync(AGENT_BINARY) ? false : `no machine agent at ${AGENT_BINARY}: build it with npm run agent`);
if (skipped) {
  console.log(`bench:machines skipped: ${skipped}`);
  process.exit(0);
}

const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const pgSchema = databaseUrl ? await postgresSchema(databaseUrl) : undefined;
const docker = new Docker();
const agents = agentConnections((machine) => docker.getContainer(containerName(machine.id)));
const machines = loadConfig({ ...process.env, MACHINE_PROVIDER: 'docker' }).machines;
/** Every machine the service was asked for and every container the bench made itself: all removed at the end. */
const created: string[] = [];

console.log(`bench/machines on ${databaseUrl ? 'PostgreSQL' : 'SQLite'}: image ${machines.image}, ${RUNS} runs of each command by each way`);
const service: Child = await startChild(new URL('./machines.child.ts', import.meta.url).pathname, {
  MACHINE_PROVIDER: 'docker',
  // The bench boots MANY small machines at once on one engine: room for them (it times boots, not placement's refusals).
  // Memory is never overcommitted: 30 smalls of the default 1 GiB would not fit this 23 GiB box, so they get 640 MiB
  // (a machine with its desktop uses about 300 MiB).
  MACHINE_CPU_OVERCOMMIT: process.env.MACHINE_CPU_OVERCOMMIT ?? '64',
  MACHINE_SIZES: process.env.MACHINE_SIZES ?? 'small=1/640m/512/10g,medium=2/2g/1024/20g,large=4/4g/2048/40g',
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

async function createMachine(name: string, more: Record<string, unknown> = {}): Promise<string> {
  const answer = await api<{ id: string }>('POST', '/api/machines', { name, ...more });
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
  const took = performance.now() - started;
  await container.remove({ force: true, v: true });
  return took;
}

// ── one command, five ways ──────────────────────────────────────────────────────────────────────────

type Way = 'mcp run_command' | 'POST /runs + poll' | 'agent alone' | 'engine exec' | 'docker exec CLI';
const BASELINE: Way = 'engine exec';

const MCP_HEADERS = { ...auth, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

async function mcpTool<T = Record<string, unknown>>(machineId: string, name: string, args: Record<string, unknown>): Promise<T> {
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } };
  const answer = await call<{ result?: { isError?: boolean; structuredContent?: T } }>('POST', `/api/machines/${machineId}/mcp`, body, MCP_HEADERS);
  const result = answer.json.result;
  if (answer.status !== 200 || result?.isError || result?.structuredContent === undefined) throw new Error(`mcp ${name}: ${answer.status} ${JSON.stringify(answer.json).slice(0, 300)}`);
  return result.structuredContent;
}

/** Each way answers the command's stdout, to check that all of them ran it. */
const ways: Record<Way, (machineId: string, command: string) => Promise<string>> = {
  async 'mcp run_command'(machineId, command) {
    const run = await mcpTool<{ stdout: string; status: string }>(machineId, 'run_command', { command });
    if (run.status !== 'succeeded') throw new Error(`run_command: ${JSON.stringify(run)}`);
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
  // The machine's agent (a run under a new id), without the service: what its run path costs beyond it.
  async 'agent alone'(machineId, command) {
    const agent = await agents.of({ id: machineId });
    return (await agent.run({ id: newId('run'), command, cwd: null, env: {}, timeoutMs: 600_000 }, new AbortController().signal))!.stdout;
  },
  // What a user does without us: the engine's exec of what the agent runs (/bin/sh -c), create, start, read, inspect.
  async 'engine exec'(machineId, command) {
    const { stdout, exitCode } = await engineExec(docker.getContainer(containerName(machineId)), ['/bin/sh', '-c', command]);
    if (exitCode !== 0) throw new Error(`engine exec: exit code ${exitCode}`);
    return stdout.toString();
  },
  async 'docker exec CLI'(machineId, command) {
    return (await promisify(execFile)('docker', ['exec', containerName(machineId), '/bin/sh', '-c', command])).stdout;
  },
};

/** RUNS of each way, interleaved, each checked against the command's stdout by the engine. */
async function commandTimes(machineId: string, command: string): Promise<Record<Way, number[]>> {
  const expected = await ways['engine exec'](machineId, command);
  const checked = (way: Way) => async () => {
    const stdout = await ways[way](machineId, command);
    if (stdout !== expected) throw new Error(`${way}: stdout ${JSON.stringify(stdout)}, expected ${JSON.stringify(expected)}`);
  };
  return interleavedTimes(Object.fromEntries((Object.keys(ways) as Way[]).map((way) => [way, checked(way)])) as Record<Way, () => Promise<void>>, RUNS);
}

// ── where a run's time goes in the service ──────────────────────────────────────────────────────────

interface Phases {
  total: number;
  [phase: string]: number;
}

/** One traced run through a way, cut into phases by the service's marks (see machines.child.ts): the service, its agent request, the service again. */
async function tracedRun(way: 'mcp run_command' | 'POST /runs + poll', machineId: string, command: string): Promise<Phases> {
  await service.request({ cmd: 'trace-on' });
  const sent = epochNow();
  await ways[way](machineId, command);
  const received = epochNow();
  const { marks } = await service.request<{ marks: Mark[] }>({ cmd: 'trace-off' });
  const first = (what: string) => {
    const found = marks.find((m) => m.what.startsWith(what));
    if (found === undefined) throw new Error(`the traced run has no mark "${what}": ${marks.map((m) => m.what).join('; ')}`);
    return found;
  };
  const httpIn = first('http in POST');
  const called = first('provider.runCommand called');
  // The run's one request on the machine's agent connection, opened once (by the warm-up): no engine call per run.
  const [sentToAgent, headers, result] = ['sent', 'headers', 'first bytes'].map((event) => first(`agent POST /v1/runs ${event}`)) as [Mark, Mark, Mark];
  const returned = first('provider.runCommand returned');
  // MCP: the tool call's answer; runs: the poll that saw the run finished.
  const answered = marks.findLast((m) => m.what.startsWith('http answered'))!;
  const between = (kind: string, from: Mark, to: Mark) =>
    marks.filter((m) => m.what.startsWith(kind) && !m.what.includes('data_version') && m.at >= from.at && m.at < to.at).reduce((sum, m) => sum + m.ms!, 0);
  return {
    total: received - sent,
    'client → request in': httpIn.at - sent,
    'request in → provider called': called.at - httpIn.at,
    // SQLite's statements only: the service's PostgreSQL queries are not traced.
    ...(databaseUrl ? {} : { '  of which SQL': between('sql', httpIn, called) }),
    'provider called → agent request sent': sentToAgent.at - called.at,
    'agent request → its answer\'s headers': headers.at - sentToAgent.at,
    'headers → the result line (the run)': result.at - headers.at,
    'result line → provider returned': returned.at - result.at,
    'engine calls meanwhile (none expected)': between('engine', called, returned),
    'provider returned → answer': answered.at - returned.at,
    ...(databaseUrl ? {} : { '  of which SQL ': between('sql', returned, answered) }),
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
const serviceRssFromProc = () => rssOf(service.process.pid!);
const serviceMemory = () => service.request<NodeJS.MemoryUsage>({ cmd: 'memory' });

// ── the run ─────────────────────────────────────────────────────────────────────────────────────────

const bench: MachinesBench = { docker, service, base, auth, mcpHeaders: MCP_HEADERS, agents, api, mcpTool, createMachine, seenRunning, destroyAll };
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
      console.log(`  \`${command}\` (${RUNS} each, interleaved):`);
      summary.push(...waysReport(label, await commandTimes(runner, command), BASELINE, { 'mcp run_command': TARGET_RATIO }));
    }
    // Where the service's time goes: a few runs traced, the median of each phase.
    for (const way of ['mcp run_command', 'POST /runs + poll'] as const) {
      const traces: Phases[] = [];
      for (let i = 0; i < TRACED; i++) traces.push(await tracedRun(way, runner, COMMANDS.true));
      printPhases(`\`true\` through ${way} (median of ${TRACED} traced runs`, medianPhases(traces));
    }
    await destroyAll([runner]);
  }
  if (PARTS.includes('agent')) summary.push(...(await agentFigures(bench)));
  if (PARTS.includes('many')) {
    // MANY machines at once: the time until all run, and the service's memory meanwhile.
    const idleRss = serviceRssFromProc();
    let peakRss = idleRss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, serviceRssFromProc())), 50);
    const started = performance.now();
    // On a failure the sampler stops before the service does (in finally below): else its read of a service
    // stopping would be the error printed, not the failure.
    const many = await bootTimes(MANY, 'many').finally(() => clearInterval(sampler));
    const allRunningMs = performance.now() - started;
    const memory = await serviceMemory();
    const destroyStarted = performance.now();
    await destroyAll(created.slice(-MANY));
    const destroyMs = performance.now() - destroyStarted;
    console.log(`  ${MANY} machines at once: all running after ${ms(allRunningMs)} (each: ${bootLine(many)}); destroyed in ${ms(destroyMs)}`);
    console.log(`    service rss ${mb(idleRss)} MB before, ${mb(memory.rss)} MB with ${MANY} running (/proc: ${mb(serviceRssFromProc())} MB; peak ${mb(peakRss)} MB), heap used ${mb(memory.heapUsed)} MB`);
    summary.push(`| ${MANY} at once: all running | ${ms(allRunningMs)} (each ${bootLine(many)}) | |`);
    summary.push(`| ${MANY} at once: service RSS | ${mb(idleRss)} MB before, ${mb(memory.rss)} MB running, peak ${mb(peakRss)} MB | |`);
  }
  if (PARTS.includes('memory')) summary.push(...(await memoryFigures(bench)));
  if (PARTS.includes('screens')) summary.push(...(await screenFigures(bench)));
  if (PARTS.includes('previews')) summary.push(...(await previewFigures(bench)));
  if (PARTS.includes('terminal')) summary.push(...(await terminalFigures(bench)));
  if (PARTS.includes('templates')) summary.push(...(await templateFigures(bench)));
  if (PARTS.includes('placement')) summary.push(...(await placementFigures(databaseUrl)));
  console.log(`\n| | measured | target |\n|---|---|---|\n${summary.join('\n')}`);
} finally {
  await service.stop();
  await removeMachineContainers(created);
  await pgSchema?.drop();
}
