import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import type { NetworkPolicy } from '../network-policy.ts';
import { statusCodeOf } from './lifecycle.ts';
import { AGENT_DIR, AGENT_VOLUME } from './container-spec.ts';
import { EGRESS_NETWORK } from './network.ts';

/** The one resolver container on an engine, shared by every service process that uses it. */
export const RESOLVER_CONTAINER = 'machine-platform-resolver';
const SETTINGS_LABEL = 'machine-platform.resolver-settings';

/**
 * The agent binary of this version in the agent volume (agent-install.ts), never the `agent` link: every service
 * process that starts points the link at its own binary, and the resolver and the service must speak alike.
 */
export const resolverBinary = (agentVersion: string) => `${AGENT_DIR}/agent-${agentVersion}`;

/** Where the resolver keeps the policies it was given, across its restarts and its remaking (a new agent). */
const RESOLVER_STATE_VOLUME = 'machine-platform-resolver-state';
const RESOLVER_STATE_DIR = '/var/lib/machine-platform';

/**
 * The command of the machines' resolver: the agent's resolver mode
 * (agent/resolver.go), listening only on the machines' egress gateway,
 * forwarding to `upstream` (or, when empty, to the resolvers of the engine
 * host's own /etc/resolv.conf, which a container on the host's network sees),
 * answering each machine by its network policy. Names without a
 * dot and reverse lookups of private addresses are answered there and never
 * forwarded: a machine learns nothing of the host's networks. A machine it has
 * no policy of yet resolves every name when the service's default is open.
 */
export function resolverCommand(gateway: string, upstream: readonly string[], defaultInternet: boolean, agentVersion: string): string[] {
  return [resolverBinary(agentVersion), 'resolver', `--listen=${gateway}`, `--state=${RESOLVER_STATE_DIR}/resolver-policies.json`, `--default-internet=${defaultInternet}`, ...upstream.map((server) => `--upstream=${server}`)];
}

/** The address machines on the egress network reach the engine's host at: where their resolver listens. */
export async function egressGateway(docker: Docker): Promise<string> {
  const network = await docker.getNetwork(EGRESS_NETWORK.name).inspect();
  const gateway = (network.IPAM?.Config ?? []).map((config: { Gateway?: string }) => config.Gateway).find((address: string | undefined) => address && !address.includes(':'));
  if (!gateway) throw new Error(`the engine's network ${EGRESS_NETWORK.name} has no IPv4 gateway for the machines' resolver`);
  return gateway;
}

/**
 * Makes sure the machines' resolver runs on the engine's host, as these
 * settings say: created once, restarted with the engine, and made again when
 * a service process starts with other settings (every process of one service
 * must name the same MACHINE_DNS_SERVERS). It runs from the default machine
 * image, unprivileged, with only the capabilities a resolver on port 53 needs.
 */
export async function ensureResolver(docker: Docker, image: string, gateway: string, upstream: readonly string[], options: { agentVersion: string; defaultInternet: boolean }): Promise<void> {
  // Service processes starting together race on the one container: one removes or creates it while another
  // inspects or starts it. The engine then answers 404 or 409 to the slower one, which looks again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await ensureResolverOnce(docker, image, gateway, upstream, options);
    } catch (error) {
      const status = statusCodeOf(error);
      if ((status !== 404 && status !== 409) || attempt === 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
  }
}

async function ensureResolverOnce(docker: Docker, image: string, gateway: string, upstream: readonly string[], options: { agentVersion: string; defaultInternet: boolean }): Promise<void> {
  // A new agent binary makes a new resolver (its command names the binary).
  const command = resolverCommand(gateway, upstream, options.defaultInternet, options.agentVersion);
  const settings = createHash('sha256').update(JSON.stringify({ image, command })).digest('hex').slice(0, 16);
  const container = docker.getContainer(RESOLVER_CONTAINER);
  let info: Docker.ContainerInspectInfo | null = null;
  try {
    info = await container.inspect();
  } catch (error) {
    if (statusCodeOf(error) !== 404) throw error;
  }
  if (info !== null && info.Config.Labels?.[SETTINGS_LABEL] !== settings) {
    await container.remove({ force: true }).catch((error: unknown) => {
      if (statusCodeOf(error) !== 404) throw error;
    });
    info = null;
  }
  if (info === null) {
    try {
      await docker.createContainer({
        name: RESOLVER_CONTAINER,
        Image: image,
        Entrypoint: [],
        Cmd: command,
        Labels: { [SETTINGS_LABEL]: settings, 'machine-platform.resolver': 'machines' },
        HostConfig: {
          NetworkMode: 'host',
          RestartPolicy: { Name: 'unless-stopped' },
          CapDrop: ['ALL'],
          // Port 53, and the machines' chains of the host's firewall (iptables).
          CapAdd: ['NET_BIND_SERVICE', 'NET_ADMIN', 'NET_RAW'],
          Mounts: [
            { Type: 'volume', Source: AGENT_VOLUME, Target: AGENT_DIR, ReadOnly: true },
            { Type: 'volume', Source: RESOLVER_STATE_VOLUME, Target: RESOLVER_STATE_DIR },
          ],
          SecurityOpt: ['no-new-privileges'],
          LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '1' } },
        },
      });
    } catch (error) {
      // Another service process created it meanwhile.
      if (statusCodeOf(error) !== 409) throw error;
    }
  }
  if (info?.State.Running) return;
  try {
    await container.start();
  } catch (error) {
    if (statusCodeOf(error) !== 304) throw error;
  }
}

/** A machine's policy as the resolver takes it (agent/resolver.go, policyRequest). */
export type ResolverRequest = { op: 'set'; address: string; machine: string; policy: NetworkPolicy } | { op: 'forget'; address: string };

/**
 * Gives the resolver a machine's policy (or tells it the address is no
 * longer that machine's) through an engine exec in its container: the
 * resolver replaces the machine's chain and answers only once the rules are
 * in. A round trip of the engine, well within a second.
 * @throws Error when the resolver is not there or refused the request.
 */
export async function sendToResolver(docker: Docker, agentVersion: string, request: ResolverRequest): Promise<void> {
  const exec = await docker.getContainer(RESOLVER_CONTAINER).exec({ Cmd: [resolverBinary(agentVersion), 'resolver-policy', JSON.stringify(request)], AttachStdout: true, AttachStderr: true, User: 'root' });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) {
    const said = Buffer.concat(chunks).toString('utf8').replace(/[\x00-\x08]/g, '').trim().slice(0, 300);
    throw new Error(`the machines' resolver did not take the network policy of ${request.address} (exit ${ExitCode}): ${said}`);
  }
}
