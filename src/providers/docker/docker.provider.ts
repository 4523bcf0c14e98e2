import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';
import type { MachinesConfig } from '../../config.ts';
import { SECOND } from '../../shared/clock.ts';
import type { Sealer } from '../../shared/sealing.ts';
import { dockerHostAddress, LOCAL_HOST, type MachineProvider, type ProviderHost, type ProviderMachine, type ProviderRun } from '../provider.ts';
import { AGENT_VOLUME, MACHINE_ID_LABEL, containerName, containerSpec, type ContainerSettings } from './container-spec.ts';
import { agentConnections } from './agent-connection.ts';
import { dockerFiles } from './files.ts';
import { dockerMetrics } from './metrics.ts';
import { dockerProcesses } from './processes.ts';
import { dockerScreen } from './screen.ts';
import { destroyMachine, engineMessage, ensureRunning, inspectMachine, observationOfExit, pauseMachine, resumeMachine, statusCodeOf, stopMachine } from './lifecycle.ts';
import { EGRESS_NETWORK, INTERNAL_NETWORK } from './network.ts';
import { diskWarning } from './disk-limits.ts';
import { sendToResolver } from './resolver.ts';
import { engineClient, probeEngine, readyEngine, type Engine } from './engine.ts';
import { defaultNetworkPolicy } from '../network-policy.ts';
import { readRunRecord, readRunScreenshot } from './records.ts';
import type { AgentRunResult } from '../agent/agent-client.ts';
import { watchEngine } from './events.ts';
import { collectKeptImages, commitMachine, dockerTemplates, KEPT_REPOSITORY, removeReference, templateImage } from './templates.ts';
import { hasImage, transferImage } from './image-transfer.ts';

/** How often a running machine is looked at anyway, should the engine's event of its end be missed. */
const SAFETY_CHECK_MS = 60 * SECOND;
/** An engine that takes longer than this to answer a ping counts as silent for that ping. */
const PING_TIMEOUT_MS = 3 * SECOND;
/** A stop in order: TERM, then KILL after this. */
const STOP_GRACE_SECONDS = 10;

function describeBytes(bytes: number): string {
  return bytes % 1024 ** 3 === 0 ? `${bytes / 1024 ** 3} GiB` : `${Math.round(bytes / 1024 ** 2)} MiB`;
}

export interface DockerProvider extends MachineProvider {
  /** The engine of the host `local` (DOCKER_HOST), for tests and the bench. */
  readonly docker: Docker;
}

/** A machine whose host this process has not readied (lost, or added since it started): asked again later. */
export class HostUnavailable extends Error {
  readonly host: string;
  constructor(host: string) {
    super(`the host ${host} is not attached in this process`);
    this.host = host;
  }
}

/**
 * MACHINE_PROVIDER=docker: each machine is one container on a Docker Engine,
 * the one of its host (engine.ts readies each; `local` is DOCKER_HOST's),
 * labelled with its id, with its size's CPUs, memory and processes as the
 * engine's limits, unprivileged, on a network that reaches the internet or
 * nothing (MACHINE_EGRESS) and never the host. A stop keeps the container,
 * and so its whole disk; a destroy removes it with its volumes. Everything
 * inside a machine goes through its agent (agent/, reached over one engine
 * exec per machine): commands under their run ids, processes, files, the
 * screen's tools.
 */
export function createDockerProvider(config: Readonly<MachinesConfig>, logger: FastifyBaseLogger, secrets: Sealer): DockerProvider {
  const sizes = Object.keys(config.sizes);
  const network = config.egress ? EGRESS_NETWORK.name : INTERNAL_NETWORK.name;
  const engines = new Map<string, Engine>();
  const localDocker = engineClient(null);
  /** @throws HostUnavailable for a host not readied here. */
  const engineOf = (host: string | null | undefined): Engine => {
    const engine = engines.get(host ?? LOCAL_HOST);
    if (engine === undefined) throw new HostUnavailable(host ?? LOCAL_HOST);
    return engine;
  };
  const dockerOf = (host: string | null | undefined) => engineOf(host).docker;
  // Machines frozen by this process for a copy of their disk (templates.ts): their check does not take that pause for a user's.
  const freezing = new Set<string>();
  const settingsOf = (machine: ProviderMachine): ContainerSettings => {
    const engine = engineOf(machine.host);
    return {
      // A template's machine starts from its image. A name MACHINE_IMAGES no longer lists: the base image, rather than a machine that cannot start again.
      image: machine.template ? templateImage(machine.template) : (machine.image !== undefined && config.images[machine.image]) || config.image,
      size: config.sizes[machine.size] ?? config.sizes[sizes[0]!]!,
      network,
      nameserver: engine.nameserver,
      limitDisk: engine.diskLimits.enforced,
    };
  };
  // Opened only where the container is made: the values live in the machine, nowhere else in the service.
  const envOf = (machine: ProviderMachine): Record<string, string> => (machine.sealedEnv ? (JSON.parse(secrets.open(machine.sealedEnv)) as Record<string, string>) : {});
  const agents = agentConnections((machine) => dockerOf(machine.host).getContainer(containerName(machine.id)), logger);
  const display = dockerScreen(agents);

  // What this process gave the resolver of each machine (its address, the policy): a machine it has not is given
  // its policy at its next check, after a restart of the service or a policy saved while its start was under way.
  const policiesGiven = new Map<string, { host: string; address: string; policy: string }>();
  /** Gives its host's resolver the machine's policy, by its address on the egress network; nothing where machines have no way out. */
  async function applyPolicy(machine: ProviderMachine, info?: Docker.ContainerInspectInfo | null): Promise<void> {
    if (!config.egress) return;
    const engine = engineOf(machine.host);
    const inspected = info ?? (await inspectMachine(engine.docker, machine.id));
    const address = inspected?.State.Running ? inspected.NetworkSettings?.Networks?.[EGRESS_NETWORK.name]?.IPAddress : undefined;
    if (!address) return;
    const policy = machine.network ?? defaultNetworkPolicy(true);
    const request = { op: 'set' as const, address, machine: machine.id, policy };
    try {
      await sendToResolver(engine.docker, engine.agentVersion, request);
    } catch (error) {
      // The resolver gone, or made again by a process with other settings: made as this one says, and asked again.
      logger.warn({ err: error, machineId: machine.id, host: engine.host }, 'the machines’ resolver did not answer; making it again');
      await engine.ensureResolver();
      await sendToResolver(engine.docker, engine.agentVersion, request);
    }
    policiesGiven.set(machine.id, { host: engine.host, address, policy: JSON.stringify(policy) });
  }
  /**
   * The address is no longer the machine's (stopped, destroyed): its rules go, before another machine is given it.
   * With `host`, only if they were given there (a moved machine's old copy going says nothing of its new one).
   */
  async function forgetPolicy(machineId: string, host?: string): Promise<void> {
    const given = policiesGiven.get(machineId);
    if (given === undefined || (host !== undefined && given.host !== host)) return;
    policiesGiven.delete(machineId);
    const engine = engines.get(given.host);
    if (engine === undefined) return;
    await sendToResolver(engine.docker, engine.agentVersion, { op: 'forget', address: given.address }).catch((err: unknown) => logger.warn({ err, machineId }, 'the resolver did not forget a machine'));
  }

  // Each host's event stream, followed once the provider watches (and for hosts readied after that).
  let notice: ((machineId: string) => void) | null = null;
  const unwatchers = new Map<string, () => void>();
  const watchHost = (engine: Engine) => {
    if (notice === null) return;
    unwatchers.get(engine.host)?.();
    unwatchers.set(engine.host, watchEngine(engine.docker, MACHINE_ID_LABEL, notice, logger));
  };

  /**
   * Gets an image a host lacks from another attached host that has it (docker save | docker load); false when
   * none has it.
   * @throws Error when the copy fails.
   */
  async function fetchFromAnotherHost(to: Docker, host: string, image: string): Promise<boolean> {
    for (const other of engines.values()) {
      if (other.host === host || !(await hasImage(other.docker, image).catch(() => false))) continue;
      logger.info({ image, from: other.host, to: host }, 'a host lacks an image: copying it from another host');
      await transferImage(other.docker, to, image);
      return true;
    }
    return false;
  }

  /** Readies a host's engine and routes its machines to it (again for a host whose address changed). */
  async function attach(host: ProviderHost) {
    // The one engine of a single-engine setup is DOCKER_HOST's, read as Docker's own clients read it (TLS variables too).
    const fromEnvironment = host.name === LOCAL_HOST && host.address === dockerHostAddress();
    const docker = fromEnvironment ? localDocker : engineClient(host.address, config.hostCertsDir === null ? undefined : `${config.hostCertsDir}/${host.name}`);
    const engine = await readyEngine(config, host.name, fromEnvironment ? null : host.address, docker, logger, (image) => fetchFromAnotherHost(docker, host.name, image));
    engines.set(host.name, engine);
    watchHost(engine);
    return engine.capacity;
  }

  const templates = dockerTemplates(dockerOf, (machine) => ({ ...settingsOf(machine), env: envOf(machine) }), freezing, logger);

  return {
    name: 'docker',
    get docker() {
      return engines.get(LOCAL_HOST)?.docker ?? localDocker;
    },
    sizes,
    defaultSize: sizes.includes('small') ? 'small' : sizes[0]!,

    hosts: {
      probe: (address) => probeEngine(engineClient(address), address),
      attach,
      async ping(name) {
        const engine = engines.get(name);
        if (engine === undefined) return false;
        let timer: NodeJS.Timeout | undefined;
        const silence = new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS);
        });
        const answered = engine.docker.ping().then(() => true, () => false);
        return Promise.race([answered, silence]).finally(() => clearTimeout(timer));
      },
      attached: () => [...engines.keys()],
      capacityOf: (name) => engines.get(name)?.capacity ?? null,

      async copyMachine(machine, to) {
        const source = engineOf(machine.host);
        const target = engineOf(to);
        // Whatever an earlier attempt left there goes first: the copy is made again from the disk as it is now.
        await destroyMachine(target.docker, machine.id);
        const info = await inspectMachine(source.docker, machine.id);
        if (info === null) return;
        if (info.State.Running) throw new Error('the machine still runs on its host: it is copied stopped');
        // Machines have no volumes of their own (the agent's, read-only, is on every host); an image that declares one
        // keeps data there that a copy of the container's disk would leave behind.
        const own = (info.Mounts ?? []).filter((mount) => mount.Type === 'volume' && mount.Name !== AGENT_VOLUME);
        if (own.length > 0) throw new Error(`its container has volumes of its own (${own.map((mount) => mount.Destination).join(', ')}), which a move does not carry`);
        const tag = `move-${machine.id.toLowerCase()}-${randomBytes(4).toString('hex')}`;
        const image = `${KEPT_REPOSITORY}:${tag}`;
        await commitMachine(source.docker, machine.id, KEPT_REPOSITORY, tag, {}, freezing, logger);
        try {
          await transferImage(source.docker, target.docker, image);
          const moved = { ...machine, host: to };
          await target.docker.createContainer(containerSpec(moved, { ...settingsOf(moved), env: envOf(moved), image }));
        } finally {
          // Nothing stands on it on the old host; on the new one the container does, and it goes with it (collectKeptImages).
          await removeReference(source.docker, image).catch((err: unknown) => logger.warn({ err, image }, 'a move’s image could not be removed from the old host'));
        }
      },

      async removeCopy(machine, host) {
        const { docker } = engineOf(host);
        await destroyMachine(docker, machine.id);
        await forgetPolicy(machine.id, host);
        await collectKeptImages(docker, Date.now()).catch((err: unknown) => logger.warn({ err }, 'kept images could not be collected; the next destroy tries again'));
      },
    },

    // One engine (no MACHINE_HOSTS): it is readied here, before the service serves, as ever; several are readied
    // by the hosts room (readyHosts), which records them.
    async start() {
      if (config.hosts.length === 0) await attach({ name: LOCAL_HOST, address: dockerHostAddress() });
    },

    warnings() {
      return [...engines.values()].flatMap((engine) => {
        const warning = diskWarning(engine.diskLimits);
        return warning === null ? [] : [engines.size > 1 ? `${engine.host}: ${warning}` : warning];
      });
    },

    // The work happens in the machine's check, right after, outside any transaction: a boot never waits here.
    async boot(_machine, now) {
      return { checkAt: now };
    },

    async observe(machine, now) {
      const { docker } = engineOf(machine.host);
      if (machine.status === 'starting') {
        // A template's machine placed where its disk is not: the template's image is copied from a host that has it
        // (none has it: the create below fails, and the boot with it).
        if (machine.template && (await inspectMachine(docker, machine.id)) === null && !(await hasImage(docker, templateImage(machine.template)))) {
          await fetchFromAnotherHost(docker, machine.host ?? LOCAL_HOST, templateImage(machine.template));
        }
        try {
          await ensureRunning(docker, machine, { ...settingsOf(machine), env: envOf(machine) });
        } catch (error) {
          // The engine out of reach: asked again later. The engine refusing: the boot failed.
          if (statusCodeOf(error) === undefined) throw error;
          logger.warn({ err: error, machineId: machine.id }, 'the engine refused to start a machine');
          return { observation: { status: 'error', reason: 'boot-failure', message: `The machine could not start: ${engineMessage(error)}` }, checkAt: null };
        }
        // Running only once its policy holds (the resolver out of reach: asked again later).
        await applyPolicy(machine);
        return { observation: { status: 'running' }, checkAt: now + SAFETY_CHECK_MS };
      }
      const info = await inspectMachine(docker, machine.id);
      if (info === null) return { observation: { status: 'error', reason: 'crash', message: "The machine's container is gone." }, checkAt: null };
      // A paused container still counts as running for the engine (State.Running and State.Paused): paused is the service's word for it.
      if (info.State.Running) {
        const given = policiesGiven.get(machine.id);
        if (given === undefined || given.policy !== JSON.stringify(machine.network ?? defaultNetworkPolicy(true))) await applyPolicy(machine, info);
        const seen = info.State.Paused && !freezing.has(machine.id) ? 'paused' : 'running';
        return { observation: seen === machine.status ? null : { status: seen }, checkAt: now + SAFETY_CHECK_MS };
      }
      await forgetPolicy(machine.id);
      return { observation: observationOfExit(info.State, describeBytes(settingsOf(machine).size.memoryBytes)), checkAt: null };
    },

    async stop(machine) {
      await stopMachine(dockerOf(machine.host), machine.id, STOP_GRACE_SECONDS);
      await forgetPolicy(machine.id);
    },
    async destroy(machine) {
      const docker = dockerOf(machine.host);
      await destroyMachine(docker, machine.id);
      await forgetPolicy(machine.id);
      // The image of a fork or a deleted template this machine was the last to stand on goes with it.
      await collectKeptImages(docker, Date.now()).catch((err: unknown) => logger.warn({ err }, 'kept images could not be collected; the next destroy tries again'));
    },
    setNetwork: (machine) => applyPolicy(machine),
    pause: (machine) => pauseMachine(dockerOf(machine.host), machine.id),
    resume: (machine) => resumeMachine(dockerOf(machine.host), machine.id),

    async runCommand(machine, run: ProviderRun, signal): Promise<AgentRunResult> {
      try {
        return await (await agents.of(machine)).run(run, signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        // The machine not running (stopped under the run, say): what its disk recorded is the answer, if anything.
        const docker = dockerOf(machine.host);
        if (!(await inspectMachine(docker, machine.id))?.State.Running) return readRunRecord(docker, containerName(machine.id), run.id);
        throw error;
      }
    },

    // A paused machine's agent is frozen with it and would never answer: no picture (live views ask whatever the status).
    screen: async (machine) => (machine.status === 'paused' ? null : display.screenshot(machine)),
    computer: (machine, plan) => display.computer(machine, plan),
    streamScreen: (machine) => display.stream(machine),
    controlScreen: (machine) => display.control(machine),
    openTerminal: async (machine, size) => (await agents.of(machine)).openTerminal(size),
    runScreenshot: (machine, runId) => readRunScreenshot(dockerOf(machine.host), containerName(machine.id), runId),

    watch(onNotice) {
      notice = onNotice;
      for (const engine of engines.values()) watchHost(engine);
      return () => {
        notice = null;
        for (const unwatch of unwatchers.values()) unwatch();
        unwatchers.clear();
      };
    },
    connectPort: async (machine, port) => (await agents.of(machine)).portStream(port),
    files: dockerFiles(agents),
    processes: dockerProcesses(agents),
    templates: {
      ...templates,
      // Its image may have been copied to other hosts for its machines: it goes from each.
      async remove(templateId, host) {
        await templates.remove(templateId, host);
        for (const other of engines.keys()) {
          if (other !== (host ?? LOCAL_HOST)) await templates.remove(templateId, other).catch((err: unknown) => logger.warn({ err, templateId, host: other }, 'a template’s copy could not be removed from a host'));
        }
      },
    },
    metrics: dockerMetrics(agents, (machine) => (engineOf(machine.host).diskLimits.enforced ? settingsOf(machine).size.diskBytes : null), logger),
  };
}
