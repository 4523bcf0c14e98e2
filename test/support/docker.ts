import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import Docker from 'dockerode';
import { createTestApp, type TestAppOptions, type TestContext } from './app.ts';
import { newOwner, type CreatedMachine, type Owner } from './machines.ts';
import { eventually } from './receiver.ts';
import { listeningSuiteHooks, suiteHooks, type ListeningSuite, type Suite } from './suite.ts';
import { startDnsServer, type DnsAnswer, type DnsServer } from './dns-server.ts';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { MACHINE_ID_LABEL } from '../../src/providers/docker/container-spec.ts';

/**
 * The Docker provider's tests run against a real engine. Where none can run
 * they are skipped, saying why; `.ci/run` sets MACHINE_DOCKER_TESTS=required,
 * and then a missing engine or image fails them instead: CI never skips them
 * silently.
 */
export async function dockerUnavailable(): Promise<string | false> {
  const docker = new Docker();
  let why: string | false = false;
  try {
    await docker.ping();
    await docker.getImage(DEFAULT_MACHINE_IMAGE).inspect();
  } catch (error) {
    why = `no Docker engine with ${DEFAULT_MACHINE_IMAGE} here (${(error as Error).message.split('\n')[0]}): start dockerd and run npm run machine-image`;
  }
  if (why && process.env.MACHINE_DOCKER_TESTS === 'required') throw new Error(`MACHINE_DOCKER_TESTS=required, but ${why}`);
  if (!why) addTestNameserverAddress();
  return why;
}

/** Removes the containers of these machines, whatever state they are in: every test cleans up after itself. */
export async function removeMachineContainers(machineIds: readonly string[]): Promise<void> {
  const docker = new Docker();
  const wanted = new Set(machineIds);
  const containers = await docker.listContainers({ all: true, filters: { label: [MACHINE_ID_LABEL] } });
  await Promise.all(
    containers
      .filter((container) => wanted.has(container.Labels[MACHINE_ID_LABEL]!))
      .map((container) => docker.getContainer(container.Id).remove({ force: true, v: true }).catch(() => {})),
  );
}

export const engine = () => new Docker();

/**
 * The nameserver the machines' resolver forwards to in every Docker test: an
 * address of the test's own (added to the loopback interface, a private
 * address like the host resolvers of most clouds), so no test ever sends a
 * machine's lookups to the host's resolver. docker-network.test.ts and
 * docker-egress.test.ts answer there, one at a time (startTestNameserver).
 * Every test process must name the same one: there is one resolver per
 * engine, made again whenever its settings change.
 */
export const TEST_NAMESERVER = '10.213.53.53';
/**
 * Where tests run servers of their own for machines to reach (docker-egress.test.ts): an engine network with a
 * fixed private range, which every Docker test opens with MACHINE_PRIVATE_ALLOW as an operator would. Every test
 * process must name the same range: each service start writes the machines' firewall from it.
 */
export const TEST_SERVERS_NETWORK = { name: 'machine-platform-test-servers', subnet: '10.213.54.0/24' } as const;
export const DOCKER_TEST_ENV: Readonly<Record<string, string>> = { MACHINE_DNS_SERVERS: TEST_NAMESERVER, MACHINE_PRIVATE_ALLOW: TEST_SERVERS_NETWORK.subnet };

/** Makes the test servers' network if it is missing (another test process may make it at the same moment). */
export async function ensureTestServersNetwork(): Promise<string> {
  const docker = new Docker();
  try {
    await docker.createNetwork({ Name: TEST_SERVERS_NETWORK.name, Driver: 'bridge', CheckDuplicate: true, IPAM: { Config: [{ Subnet: TEST_SERVERS_NETWORK.subnet }] }, Labels: { 'machine-platform.test': 'servers' } });
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 409) throw error;
  }
  return TEST_SERVERS_NETWORK.name;
}

/**
 * The test's nameserver on TEST_NAMESERVER:53, waiting (up to `waitMs`) while
 * another test process holds that port: the tests that answer there take turns.
 */
export async function startTestNameserver(answer: (name: string) => DnsAnswer, waitMs = 300_000): Promise<DnsServer> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await startDnsServer(answer, { host: TEST_NAMESERVER, port: 53 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** Puts TEST_NAMESERVER on the loopback interface (the kernel here has no dummy interfaces); once per host, as root. */
export function addTestNameserverAddress(): void {
  const shown = execFileSync('ip', ['-4', 'addr', 'show', 'dev', 'lo'], { encoding: 'utf8' });
  if (shown.includes(`inet ${TEST_NAMESERVER}/`)) return;
  try {
    execFileSync('ip', ['addr', 'add', `${TEST_NAMESERVER}/32`, 'dev', 'lo'], { stdio: 'pipe' });
  } catch (error) {
    // Added meanwhile by another test process.
    if (!/File exists/.test(String((error as { stderr?: Buffer }).stderr))) throw error;
  }
}

/** The app on the Docker provider (real clock: the engine's time is real), an owner, and a close that removes its machines' containers. */
export interface DockerApp {
  ctx: TestContext;
  owner: Owner;
  close(): Promise<void>;
}

export async function startDockerApp(options: TestAppOptions = {}): Promise<DockerApp> {
  const ctx = await createTestApp({ realClock: true, ...options, env: { MACHINE_PROVIDER: 'docker', ...DOCKER_TEST_ENV, ...options.env } });
  const owner = await newOwner(ctx);
  return {
    ctx,
    owner,
    async close() {
      const machines = await ctx.app.deps.db.selectFrom('machines').select('id').execute();
      await ctx.close();
      await removeMachineContainers(machines.map((machine) => machine.id));
    },
  };
}

/** Registers a describe block's hooks: the app on the Docker provider and its owner, in the returned suite once the block starts. */
export function dockerSuite(options: TestAppOptions = {}): Suite {
  return suiteHooks(() => startDockerApp(options));
}

/** As dockerSuite, with the app listening at `base` for MCP clients, which go in `clients` to be closed before the app. */
export function listeningDockerSuite(options: TestAppOptions = {}): ListeningSuite {
  return listeningSuiteHooks(() => startDockerApp(options));
}

/** Waits for a machine to reach a status. */
export function untilStatus(owner: Owner, machineId: string, status: string, timeoutMs = 60_000): Promise<true> {
  return eventually(async () => ((await owner.call('GET', `/api/machines/${machineId}`)).json().status === status ? true : undefined), timeoutMs, `machine ${machineId} ${status}`);
}

/** Creates a machine and waits until it runs on the engine. */
export async function runningDockerMachine(owner: Owner, body: Record<string, unknown>, timeoutMs?: number): Promise<CreatedMachine> {
  const created = await owner.call('POST', '/api/machines', body);
  assert.equal(created.statusCode, 201, created.body);
  await untilStatus(owner, created.json().id, 'running', timeoutMs);
  return created.json();
}

export type FinishedRun = Record<string, unknown> & { id: string; status: string; exitCode: number | null; stdout: string | null; stderr: string | null; output: string | null; timedOut: boolean };

/** Starts a manual run and waits for its end, as GET /api/runs/{id} then shows it. */
export async function runToEnd(owner: Owner, machineId: string, body: Record<string, unknown>): Promise<FinishedRun> {
  const queued = await owner.call('POST', `/api/machines/${machineId}/runs`, body);
  if (queued.statusCode !== 201) throw new Error(`the run was refused: ${queued.body}`);
  return eventually(async () => {
    const current = (await owner.call('GET', `/api/runs/${queued.json().id}`)).json() as FinishedRun;
    return current.status === 'succeeded' || current.status === 'failed' ? current : undefined;
  }, 120_000, `run ${String(body.command)}`);
}
