import Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';
import { ConfigError, DEFAULT_MACHINE_IMAGE, type MachinesConfig } from '../../config.ts';
import { SECOND } from '../../shared/clock.ts';
import type { Sealer } from '../../shared/sealing.ts';
import type { MachineProvider, ProviderMachine, ProviderRun } from '../provider.ts';
import { MACHINE_ID_LABEL, containerName, type ContainerSettings } from './container-spec.ts';
import { agentConnections } from './agent-connection.ts';
import { installAgent } from './agent-install.ts';
import { dockerFiles } from './files.ts';
import { dockerMetrics } from './metrics.ts';
import { dockerProcesses } from './processes.ts';
import { dockerScreen } from './screen.ts';
import { destroyMachine, engineMessage, ensureRunning, inspectMachine, observationOfExit, pauseMachine, resumeMachine, statusCodeOf, stopMachine } from './lifecycle.ts';
import { EGRESS_NETWORK, INTERNAL_NETWORK, ensureNetworks, installFirewall } from './network.ts';
import { diskWarning, probeDiskLimits, type DiskLimits } from './disk-limits.ts';
import { egressGateway, ensureResolver, sendToResolver } from './resolver.ts';
import { defaultNetworkPolicy } from '../network-policy.ts';
import { readRunRecord, readRunScreenshot } from './records.ts';
import type { AgentRunResult } from '../agent/agent-client.ts';
import { watchEngine } from './events.ts';
import { collectKeptImages, dockerTemplates, templateImage } from './templates.ts';

/** How often a running machine is looked at anyway, should the engine's event of its end be missed. */
const SAFETY_CHECK_MS = 60 * SECOND;
/** A stop in order: TERM, then KILL after this. */
const STOP_GRACE_SECONDS = 10;

function describeBytes(bytes: number): string {
  return bytes % 1024 ** 3 === 0 ? `${bytes / 1024 ** 3} GiB` : `${Math.round(bytes / 1024 ** 2)} MiB`;
}

export interface DockerProvider extends MachineProvider {
  /** The engine, for tests and the bench. */
  readonly docker: Docker;
}

/**
 * MACHINE_PROVIDER=docker: each machine is one container on a Docker Engine
 * (DOCKER_HOST, as Docker's own clients read it), labelled with its id, with
 * its size's CPUs, memory and processes as the engine's limits, unprivileged,
 * on a network that reaches the internet or nothing (MACHINE_EGRESS) and
 * never the host. A stop keeps the container, and so its whole disk; a
 * destroy removes it with its volumes. Everything inside a machine goes
 * through its agent (agent/, reached over one engine exec per machine):
 * commands under their run ids, processes, files, the screen's tools.
 */
export function createDockerProvider(config: Readonly<MachinesConfig>, logger: FastifyBaseLogger, secrets: Sealer): DockerProvider {
  const docker = new Docker();
  const sizes = Object.keys(config.sizes);
  const network = config.egress ? EGRESS_NETWORK.name : INTERNAL_NETWORK.name;
  // Learnt at start: where the machines' resolver listens, and whether the engine holds disks to their size.
  let nameserver: string | null = null;
  let diskLimits: DiskLimits = { enforced: false, why: 'the engine was not asked yet' };
  // Machines frozen by this process for a copy of their disk (templates.ts): their check does not take that pause for a user's.
  const freezing = new Set<string>();
  const settingsOf = (machine: ProviderMachine): ContainerSettings => ({
    // A template's machine starts from its image. A name MACHINE_IMAGES no longer lists: the base image, rather than a machine that cannot start again.
    image: machine.template ? templateImage(machine.template) : (machine.image !== undefined && config.images[machine.image]) || config.image,
    size: config.sizes[machine.size] ?? config.sizes[sizes[0]!]!,
    network,
    nameserver: config.egress ? nameserver : null,
    limitDisk: diskLimits.enforced,
  });
  // Opened only where the container is made: the values live in the machine, nowhere else in the service.
  const envOf = (machine: ProviderMachine): Record<string, string> => (machine.sealedEnv ? (JSON.parse(secrets.open(machine.sealedEnv)) as Record<string, string>) : {});
  const containerOf = (machineId: string) => docker.getContainer(containerName(machineId));
  const agents = agentConnections(containerOf, logger);
  const display = dockerScreen(agents);

  // What this process gave the resolver of each machine (its address, the policy): a machine it has not is given
  // its policy at its next check, after a restart of the service or a policy saved while its start was under way.
  const policiesGiven = new Map<string, { address: string; policy: string }>();
  /** Set at start: makes the resolver as this process's settings say. */
  let ensureOurResolver: (() => Promise<void>) | null = null;
  /** The agent binary this process installed: the resolver runs it, and is spoken to with it. */
  let agentVersion = '';
  /** Gives the resolver the machine's policy, by its address on the egress network; nothing where machines have no way out. */
  async function applyPolicy(machine: ProviderMachine, info?: Docker.ContainerInspectInfo | null): Promise<void> {
    if (!config.egress) return;
    const inspected = info ?? (await inspectMachine(docker, machine.id));
    const address = inspected?.State.Running ? inspected.NetworkSettings?.Networks?.[EGRESS_NETWORK.name]?.IPAddress : undefined;
    if (!address) return;
    const policy = machine.network ?? defaultNetworkPolicy(true);
    const request = { op: 'set' as const, address, machine: machine.id, policy };
    try {
      await sendToResolver(docker, agentVersion, request);
    } catch (error) {
      // The resolver gone, or made again by a process with other settings: made as this one says, and asked again.
      if (ensureOurResolver === null) throw error;
      logger.warn({ err: error, machineId: machine.id }, 'the machines’ resolver did not answer; making it again');
      await ensureOurResolver();
      await sendToResolver(docker, agentVersion, request);
    }
    policiesGiven.set(machine.id, { address, policy: JSON.stringify(policy) });
  }
  /** The address is no longer the machine's (stopped, destroyed): its rules go, before another machine is given it. */
  async function forgetPolicy(machineId: string): Promise<void> {
    const given = policiesGiven.get(machineId);
    if (given === undefined) return;
    policiesGiven.delete(machineId);
    await sendToResolver(docker, agentVersion, { op: 'forget', address: given.address }).catch((err: unknown) => logger.warn({ err, machineId }, 'the resolver did not forget a machine'));
  }

  return {
    name: 'docker',
    docker,
    sizes,
    defaultSize: sizes.includes('small') ? 'small' : sizes[0]!,

    async start() {
      try {
        await docker.ping();
      } catch (error) {
        throw new ConfigError(`DOCKER_HOST: cannot reach the Docker engine at ${process.env.DOCKER_HOST || 'unix:///var/run/docker.sock'} (${engineMessage(error)})`);
      }
      for (const image of new Set([config.image, DEFAULT_MACHINE_IMAGE])) {
        try {
          await docker.getImage(image).inspect();
        } catch (error) {
          if (statusCodeOf(error) !== 404) throw error;
          const why = image === config.image ? 'the image of every machine' : 'the image the machines’ firewall runs from';
          throw new ConfigError(`MACHINE_IMAGE: ${image} (${why}) is not on the Docker engine; build it with \`npm run machine-image\``);
        }
      }
      for (const [name, image] of Object.entries(config.images)) {
        try {
          await docker.getImage(image).inspect();
        } catch (error) {
          if (statusCodeOf(error) !== 404) throw error;
          throw new ConfigError(`MACHINE_IMAGES: ${image} (the image "${name}") is not on the Docker engine; pull or build it first`);
        }
      }
      await ensureNetworks(docker);
      const agent = await installAgent(docker, DEFAULT_MACHINE_IMAGE);
      logger.debug({ agent }, 'the machine agent is installed');
      const gateway = await egressGateway(docker);
      agentVersion = agent.version;
      ensureOurResolver = () => ensureResolver(docker, DEFAULT_MACHINE_IMAGE, gateway, config.dnsServers, { agentVersion: agent.version, defaultInternet: config.egress });
      // Independent, and each a container's round trip: at once.
      [, , diskLimits] = await Promise.all([
        installFirewall(docker, DEFAULT_MACHINE_IMAGE, gateway, config.privateAllow),
        ensureOurResolver(),
        probeDiskLimits(docker, config.image),
      ]);
      nameserver = gateway;
      const warning = diskWarning(diskLimits);
      if (warning !== null) logger.warn({ storage: diskLimits }, warning);
    },

    warnings() {
      const warning = diskWarning(diskLimits);
      return warning === null ? [] : [warning];
    },

    // The work happens in the machine's check, right after, outside any transaction: a boot never waits here.
    async boot(_machine, now) {
      return { checkAt: now };
    },

    async observe(machine, now) {
      if (machine.status === 'starting') {
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
      await stopMachine(docker, machine.id, STOP_GRACE_SECONDS);
      await forgetPolicy(machine.id);
    },
    async destroy(machine) {
      await destroyMachine(docker, machine.id);
      await forgetPolicy(machine.id);
      // The image of a fork or a deleted template this machine was the last to stand on goes with it.
      await collectKeptImages(docker, Date.now()).catch((err: unknown) => logger.warn({ err }, 'kept images could not be collected; the next destroy tries again'));
    },
    setNetwork: (machine) => applyPolicy(machine),
    pause: (machine) => pauseMachine(docker, machine.id),
    resume: (machine) => resumeMachine(docker, machine.id),

    async runCommand(machine, run: ProviderRun, signal): Promise<AgentRunResult> {
      try {
        return await (await agents.of(machine.id)).run(run, signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        // The machine not running (stopped under the run, say): what its disk recorded is the answer, if anything.
        if (!(await inspectMachine(docker, machine.id))?.State.Running) return readRunRecord(docker, containerName(machine.id), run.id);
        throw error;
      }
    },

    // A paused machine's agent is frozen with it and would never answer: no picture (live views ask whatever the status).
    screen: async (machine) => (machine.status === 'paused' ? null : display.screenshot(machine)),
    computer: (machine, plan) => display.computer(machine, plan),
    streamScreen: (machine) => display.stream(machine),
    controlScreen: (machine) => display.control(machine),
    openTerminal: async (machine, size) => (await agents.of(machine.id)).openTerminal(size),
    runScreenshot: (machine, runId) => readRunScreenshot(docker, containerName(machine.id), runId),

    watch: (notice) => watchEngine(docker, MACHINE_ID_LABEL, notice, logger),
    connectPort: async (machine, port) => (await agents.of(machine.id)).portStream(port),
    files: dockerFiles(agents),
    processes: dockerProcesses(agents),
    templates: dockerTemplates(docker, (machine) => ({ ...settingsOf(machine), env: envOf(machine) }), freezing, logger),
    metrics: dockerMetrics(agents, (machine) => (diskLimits.enforced ? settingsOf(machine).size.diskBytes : null), logger),
  };
}
