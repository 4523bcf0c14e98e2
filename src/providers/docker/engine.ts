import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';
import { ConfigError, DEFAULT_MACHINE_IMAGE, type MachinesConfig } from '../../config.ts';
import { dockerHostAddress, type HostCapacity } from '../provider.ts';
import { installAgent } from './agent-install.ts';
import { diskWarning, probeDiskLimits, type DiskLimits } from './disk-limits.ts';
import { hasImage } from './image-transfer.ts';
import { engineMessage } from './lifecycle.ts';
import { ensureNetworks, installFirewall } from './network.ts';
import { egressGateway, ensureResolver } from './resolver.ts';

/** How long a probe of an engine an operator names may take before it is said to be out of reach. */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * A client of the engine at `address`: `unix:///path`, `tcp://host:port`
 * (TLS with `ca.pem`, `cert.pem` and `key.pem` from `certsDir` when that
 * folder exists, as DOCKER_CERT_PATH holds them) or `ssh://user@host[:port]`;
 * null: the engine DOCKER_HOST names, as Docker's own clients read it.
 * @throws Error for an address of another kind.
 */
export function engineClient(address: string | null, certsDir?: string): Docker {
  if (address === null) return new Docker();
  const url = new URL(address);
  switch (url.protocol) {
    case 'unix:':
      return new Docker({ socketPath: url.pathname });
    case 'tcp:': {
      const port = Number(url.port || 2375);
      if (certsDir !== undefined && existsSync(certsDir)) {
        const read = (name: string) => readFileSync(join(certsDir, name));
        return new Docker({ protocol: 'https', host: url.hostname, port, ca: read('ca.pem'), cert: read('cert.pem'), key: read('key.pem') });
      }
      return new Docker({ protocol: 'http', host: url.hostname, port });
    }
    case 'ssh:':
      return new Docker({ protocol: 'ssh', host: url.hostname, port: Number(url.port || 22), username: decodeURIComponent(url.username || 'root') } as Docker.DockerOptions);
  }
  throw new Error(`${address} is not an engine address: use unix:///path, tcp://host:port or ssh://user@host`);
}

/** What an engine holds: its CPUs and memory (the engine's `info`); disk where its storage says. */
export async function engineCapacity(docker: Docker): Promise<HostCapacity> {
  const info = (await docker.info()) as { NCPU?: number; MemTotal?: number; Driver?: string };
  if (typeof info.NCPU !== 'number' || typeof info.MemTotal !== 'number') throw new Error('it answered, but not as a Docker engine does (no CPUs or memory in its info)');
  return { cpus: info.NCPU, memoryBytes: info.MemTotal, diskBytes: null };
}

/**
 * Reaches the engine at `address` and reads its capacity, within a few seconds.
 * @throws Error with one line saying why it cannot be used.
 */
export async function probeEngine(docker: Docker, address: string): Promise<HostCapacity> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS / 1000} s`)), PROBE_TIMEOUT_MS);
  });
  try {
    const pong = await Promise.race([docker.ping(), timeout]);
    if (!String(pong).includes('OK')) throw new Error('it answered, but not as a Docker engine does');
    return await Promise.race([engineCapacity(docker), timeout]);
  } catch (error) {
    throw new Error(`cannot use the engine at ${address}: ${engineMessage(error)}`);
  } finally {
    clearTimeout(timer);
  }
}

/** One engine readied for machines: what each machine's container is made with there. */
export interface Engine {
  readonly host: string;
  readonly address: string | null;
  readonly docker: Docker;
  /** Where machines with a way out resolve names (the resolver on the egress gateway); null when they have none. */
  readonly nameserver: string | null;
  readonly diskLimits: DiskLimits;
  /** Makes its resolver as this process's settings say (again, after another process made it otherwise). */
  ensureResolver(): Promise<void>;
  readonly agentVersion: string;
  readonly capacity: HostCapacity;
}

/**
 * Readies an engine for machines, once per process: reachable, the machine
 * images there (each one missing fetched from another host through
 * `fetchImage`, which answers false when no host has it), the networks, the agent in its volume, the firewall, the
 * machines' resolver, and whether it holds disks to their size.
 * @throws ConfigError naming what to fix.
 */
export async function readyEngine(
  config: Readonly<MachinesConfig>,
  host: string,
  address: string | null,
  docker: Docker,
  logger: FastifyBaseLogger,
  fetchImage: (image: string) => Promise<boolean> = async () => false,
): Promise<Engine> {
  const where = address ?? dockerHostAddress();
  const variable = address === null ? 'DOCKER_HOST' : `the host ${host}`;
  try {
    await docker.ping();
  } catch (error) {
    throw new ConfigError(`${variable}: cannot reach the Docker engine at ${where} (${engineMessage(error)})`);
  }
  // A host without an image gets it from another host that has it (fetchImage) before it takes machines.
  const missing = async (image: string) => !(await hasImage(docker, image)) && !(await fetchImage(image));
  for (const image of new Set([config.image, DEFAULT_MACHINE_IMAGE])) {
    if (!(await missing(image))) continue;
    const why = image === config.image ? 'the image of every machine' : 'the image the machines’ firewall runs from';
    throw new ConfigError(`MACHINE_IMAGE: ${image} (${why}) is not on the Docker engine at ${where} nor on any other host; build it with \`npm run machine-image\``);
  }
  for (const [name, image] of Object.entries(config.images)) {
    if (await missing(image)) throw new ConfigError(`MACHINE_IMAGES: ${image} (the image "${name}") is not on the Docker engine at ${where} nor on any other host; pull or build it first`);
  }
  await ensureNetworks(docker);
  const agent = await installAgent(docker, DEFAULT_MACHINE_IMAGE);
  logger.debug({ agent, host }, 'the machine agent is installed');
  const gateway = await egressGateway(docker);
  const ensureOurResolver = () => ensureResolver(docker, DEFAULT_MACHINE_IMAGE, gateway, config.dnsServers, { agentVersion: agent.version, defaultInternet: config.egress });
  // Independent, and each a container's round trip: at once.
  const [, , diskLimits, capacity] = await Promise.all([
    installFirewall(docker, DEFAULT_MACHINE_IMAGE, gateway, config.privateAllow),
    ensureOurResolver(),
    probeDiskLimits(docker, config.image),
    engineCapacity(docker),
  ]);
  const warning = diskWarning(diskLimits);
  if (warning !== null) logger.warn({ storage: diskLimits, host }, warning);
  return { host, address, docker, nameserver: config.egress ? gateway : null, diskLimits, ensureResolver: ensureOurResolver, agentVersion: agent.version, capacity };
}
