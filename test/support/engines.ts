import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';

const run = promisify(execFile);

/**
 * Engines of their own for the multi-host tests: one `dockerd` per network
 * namespace, each with its own data root, exec root and socket, as separate
 * hosts would be. Their data roots persist under ENGINES_ROOT, so the machine
 * image is copied into each once and later runs start in seconds; the
 * namespaces, addresses and daemons are made by each test and taken down after.
 * They store with overlay2, never on the main engine's btrfs file system:
 * Docker's btrfs driver turns the file system's quotas off when its daemon
 * stops, which would take every machine's disk limit (and every container
 * created with one) from the main engine.
 */
const ENGINES_ROOT = process.env.TEST_ENGINES_ROOT ?? '/var/lib/machine-platform-test-hosts';
/** Each engine's link to the host: 10.213.(60+n).1 on the host's side, .2 in the namespace. */
const subnetOf = (n: number) => `10.213.${60 + n}`;
const START_WAIT_MS = 60_000;

export interface TestEngine {
  readonly n: number;
  /** The namespace's name, and the engine's host name in the tests: `mp-host<n>`. */
  readonly name: string;
  /** Where its API answers: `unix:///run/mp-host<n>/docker.sock`. */
  readonly address: string;
  readonly docker: Docker;
  /** SIGKILL of the daemon (its containers' shims stay, as after a crash of the engine). */
  kill(): Promise<void>;
  /** The daemon started again on its data root. */
  start(): Promise<void>;
}

async function sh(command: string): Promise<string> {
  const { stdout } = await run('/bin/sh', ['-c', command], { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

async function makeNamespace(n: number): Promise<void> {
  const ns = `mp-host${n}`;
  const subnet = subnetOf(n);
  await sh(`ip netns del ${ns} 2>/dev/null; ip link del mp-h${n} 2>/dev/null; true`);
  await sh(
    [
      `ip netns add ${ns}`,
      `ip link add mp-h${n} type veth peer name eth0 netns ${ns}`,
      `ip addr add ${subnet}.1/24 dev mp-h${n}`,
      `ip link set mp-h${n} up`,
      `ip -n ${ns} addr add ${subnet}.2/24 dev eth0`,
      `ip -n ${ns} link set eth0 up`,
      `ip -n ${ns} link set lo up`,
      `ip -n ${ns} route add default via ${subnet}.1`,
    ].join(' && '),
  );
}

/**
 * A daemon killed leaves its pid file, and dockerd refuses to start while the process that file names exists: by
 * the next start (the next test run, say) that number may be another process's (a kernel thread was seen). The
 * file goes, and a daemon still running on it (left by a run that crashed) is killed first.
 */
async function clearPidFile(file: string): Promise<void> {
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (Number.isInteger(pid) && pid > 0) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').includes(`--pidfile=${file}`)) {
      process.kill(pid, 'SIGKILL');
      for (let waited = 0; waited < 5000 && (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')) !== ''; waited += 100) await sleep(100);
    }
  }
  await rm(file, { force: true });
}

/** One engine in its namespace, the machine image copied into it. */
export async function startTestEngine(n: number): Promise<TestEngine> {
  const name = `mp-host${n}`;
  const runDir = `/run/${name}`;
  const dataRoot = `${ENGINES_ROOT}/${n}`;
  const address = `unix://${runDir}/docker.sock`;
  const docker = new Docker({ socketPath: `${runDir}/docker.sock` });
  await mkdir(dataRoot, { recursive: true });
  await mkdir(runDir, { recursive: true });
  await makeNamespace(n);
  let daemon: ChildProcess | null = null;

  const start = async () => {
    await rm(`${runDir}/docker.sock`, { force: true });
    await clearPidFile(`${runDir}/dockerd.pid`);
    // nsenter, not `ip netns exec`: the latter mounts a sysfs of its own, without the cgroup file system dockerd needs.
    daemon = spawn(
      'nsenter',
      [`--net=/run/netns/${name}`, 'dockerd', `--data-root=${dataRoot}`, `--exec-root=${runDir}/exec`, `--pidfile=${runDir}/dockerd.pid`, `--host=${address}`, '--storage-driver=overlay2'],
      { stdio: ['ignore', 'ignore', 'ignore'], detached: true },
    );
    daemon.unref();
    const deadline = Date.now() + START_WAIT_MS;
    for (;;) {
      try {
        await docker.ping();
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`the test engine ${name} did not answer within ${START_WAIT_MS} ms: ${(error as Error).message}`);
        await sleep(250);
      }
    }
  };
  await start();
  await copyImage(new Docker(), docker, DEFAULT_MACHINE_IMAGE);
  return {
    n,
    name,
    address,
    docker,
    async kill() {
      // By the handle of the daemon this process started: a pid file outlives its daemon, and by then its number may
      // be another process's (a SIGKILL to it took down a service running beside the tests).
      const running: ChildProcess | null = daemon;
      if (running === null || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await Promise.race([exited, sleep(5000)]);
    },
    start,
  };
}

/** Copies an image from one engine to another unless it is there: `docker save | docker load`. */
async function copyImage(from: Docker, to: Docker, image: string): Promise<void> {
  try {
    await to.getImage(image).inspect();
    return;
  } catch {
    // Missing: copied below.
  }
  const tar = await from.getImage(image).get();
  const loading = await to.loadImage(tar as NodeJS.ReadableStream);
  await new Promise<void>((resolve, reject) => {
    to.modem.followProgress(loading, (error: Error | null) => (error ? reject(error) : resolve()));
  });
}

/**
 * Takes an engine down: its containers (force-removed through its API when it answers), its daemon, its namespace
 * and link. Its data root stays for the next run (images); its containers' layers go with them.
 */
export async function stopTestEngine(engine: TestEngine): Promise<void> {
  try {
    const containers = await engine.docker.listContainers({ all: true });
    await Promise.all(containers.map((container) => engine.docker.getContainer(container.Id).remove({ force: true, v: true }).catch(() => {})));
  } catch {
    // Not answering: its containers are removed at its next start (no live restore), or by the next run.
  }
  await engine.kill();
  await sh(`pkill -f '[c]ontainerd --config /run/${engine.name}/' 2>/dev/null; ip netns del ${engine.name} 2>/dev/null; ip link del mp-h${engine.n} 2>/dev/null; true`);
}

/** Engines numbered `numbers`, started side by side; when one cannot start, those that did are stopped before the error. */
export async function startTestEngines(numbers: readonly number[]): Promise<TestEngine[]> {
  const started = await Promise.allSettled(numbers.map((n) => startTestEngine(n)));
  const failed = started.find((result) => result.status === 'rejected');
  if (failed === undefined) return started.map((result) => (result as PromiseFulfilledResult<TestEngine>).value);
  await Promise.all(started.flatMap((result) => (result.status === 'fulfilled' ? [stopTestEngine(result.value)] : [])));
  throw failed.reason;
}
