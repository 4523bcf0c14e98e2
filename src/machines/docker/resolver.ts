import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { statusCodeOf } from './lifecycle.ts';
import { EGRESS_NETWORK } from './network.ts';

/** The one resolver container on an engine, shared by every service process that uses it. */
export const RESOLVER_CONTAINER = 'machine-platform-resolver';
const SETTINGS_LABEL = 'machine-platform.resolver-settings';

/**
 * The command of the machines' resolver: dnsmasq, listening only on the
 * machines' egress gateway, forwarding to `upstream` (or, when empty, to the
 * resolvers of the engine host's own /etc/resolv.conf, which a container on
 * the host's network sees). Names without a dot and reverse lookups of private
 * addresses are answered here and never forwarded: a machine learns nothing
 * of the host's networks. It keeps root's ids (`--user=root`): dropping to its
 * own user, it could not read the resolv.conf it forwards by.
 */
export function resolverCommand(gateway: string, upstream: readonly string[]): string[] {
  return [
    'dnsmasq',
    '--keep-in-foreground',
    '--user=root',
    '--no-hosts',
    `--listen-address=${gateway}`,
    '--bind-dynamic',
    '--domain-needed',
    '--bogus-priv',
    '--cache-size=1000',
    '--log-facility=-',
    ...(upstream.length > 0 ? ['--no-resolv', ...upstream.map((server) => `--server=${server}`)] : ['--resolv-file=/etc/resolv.conf']),
  ];
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
export async function ensureResolver(docker: Docker, image: string, gateway: string, upstream: readonly string[]): Promise<void> {
  const command = resolverCommand(gateway, upstream);
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
          CapAdd: ['NET_BIND_SERVICE', 'SETUID', 'SETGID'],
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
