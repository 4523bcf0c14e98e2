import type Docker from 'dockerode';

/** Machines that may reach the internet join this network; the others, one with no way out at all. */
export const EGRESS_NETWORK = { name: 'machine-platform', bridge: 'mp-egress0', internal: false } as const;
export const INTERNAL_NETWORK = { name: 'machine-platform-internal', bridge: 'mp-internal0', internal: true } as const;

/**
 * Where a machine must never connect, whatever MACHINE_EGRESS says: the
 * host's loopback and private, link-local (cloud metadata), shared (CGNAT),
 * multicast and reserved ranges, so neither the service, its database, the
 * engine's API nor any other machine or container. Public addresses stay
 * reachable when egress is on.
 */
const REFUSED_DESTINATIONS = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.168.0.0/16', '198.18.0.0/15', '224.0.0.0/3'];

/** Where every packet a machine on the egress bridge sends is decided (the service's rules, made again at each start). */
export const EGRESS_CHAIN = 'MP-EGRESS';
/** One rule per machine, to its own chain: filled by the machines' resolver (agent/resolver.go), never here. */
export const MACHINES_CHAIN = 'MP-MACHINES';

/**
 * The egress chain, whole (iptables-restore --noflush replaces it at once, so
 * it is never seen half made): never another machine; the operator's private
 * ranges (MACHINE_PRIVATE_ALLOW) go to the machine's own policy, and are open
 * to a machine that has none (the service's default); every refused range is
 * dropped; then the machine's own chain decides (internet, allow, deny, the
 * addresses its resolver answered), and a machine it does not know yet goes
 * on to the engine's rules: the internet.
 */
export function egressChainRules(privateAllow: readonly string[]): string {
  const rules = [
    ...[EGRESS_NETWORK.bridge, INTERNAL_NETWORK.bridge].map((bridge) => `-A ${EGRESS_CHAIN} -o ${bridge} -j DROP`),
    ...privateAllow.flatMap((range) => [`-A ${EGRESS_CHAIN} -d ${range} -j ${MACHINES_CHAIN}`, `-A ${EGRESS_CHAIN} -d ${range} -j ACCEPT`]),
    ...REFUSED_DESTINATIONS.map((range) => `-A ${EGRESS_CHAIN} -d ${range} -j DROP`),
    `-A ${EGRESS_CHAIN} -j ${MACHINES_CHAIN}`,
  ];
  return ['*filter', `:${EGRESS_CHAIN} - [0:0]`, ...rules, 'COMMIT', ''].join('\n');
}

/**
 * Rules on the engine's host, idempotent (checked before inserted): nothing
 * from a machine bridge reaches the host itself (INPUT: the engine's API, the
 * service, its database, whatever listens on any of the host's addresses),
 * and nothing it forwards goes to a refused range (DOCKER-USER, the chain the
 * engine keeps for rules of its users; FORWARD where there is none). One
 * opening: the machines' resolver, port 53 of the egress gateway, taken out
 * and put back on top each time so it stays above the DROP.
 */
export function firewallScript(resolverAddress: string | null, privateAllow: readonly string[] = []): string {
  const bridges = [EGRESS_NETWORK.bridge, INTERNAL_NETWORK.bridge];
  const rule = (chain: string, spec: string) => `iptables -w -C ${chain} ${spec} 2>/dev/null || iptables -w -I ${chain} ${spec}`;
  const onTop = (chain: string, spec: string) => `while iptables -w -D ${chain} ${spec} 2>/dev/null; do :; done; iptables -w -I ${chain} ${spec}`;
  const resolver = resolverAddress === null ? [] : ['udp', 'tcp'].map((protocol) => onTop('INPUT', `-i ${EGRESS_NETWORK.bridge} -d ${resolverAddress} -p ${protocol} --dport 53 -j ACCEPT`));
  return [
    'set -e',
    'chain=DOCKER-USER; iptables -w -n -L DOCKER-USER >/dev/null 2>&1 || chain=FORWARD',
    ...bridges.flatMap((bridge) => [rule('INPUT', `-i ${bridge} -j DROP`), ...REFUSED_DESTINATIONS.map((range) => rule('"$chain"', `-i ${bridge} -d ${range} -j DROP`))]),
    ...resolver,
    // Each machine's own policy: its packets through the egress chain first, and the answers to
    // connections it opened back in (those from a private range the operator opened cross the engine's
    // isolation of its networks, which would drop them).
    `iptables -w -N ${MACHINES_CHAIN} 2>/dev/null || true`,
    `iptables -w -N ${EGRESS_CHAIN} 2>/dev/null || true`,
    `iptables-restore --noflush --wait <<'RULES'\n${egressChainRules(privateAllow)}RULES`,
    onTop('"$chain"', `-o ${EGRESS_NETWORK.bridge} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`),
    onTop('"$chain"', `-i ${EGRESS_NETWORK.bridge} -j ${EGRESS_CHAIN}`),
  ].join('\n');
}

/** Creates the two networks if they are missing; machines of one network cannot reach each other either. */
export async function ensureNetworks(docker: Docker): Promise<void> {
  const existing = new Set((await docker.listNetworks()).map((network) => network.Name));
  for (const network of [EGRESS_NETWORK, INTERNAL_NETWORK]) {
    if (existing.has(network.name)) continue;
    try {
      await docker.createNetwork({
        Name: network.name,
        Driver: 'bridge',
        Internal: network.internal,
        CheckDuplicate: true,
        Options: { 'com.docker.network.bridge.name': network.bridge, 'com.docker.network.bridge.enable_icc': 'false' },
        Labels: { 'machine-platform.network': 'machines' },
      });
    } catch (error) {
      // Another service process created it meanwhile.
      if ((error as { statusCode?: number }).statusCode !== 409) throw error;
    }
  }
}

/**
 * Installs the firewall rules from a short-lived container on the host's
 * network with NET_ADMIN (not privileged), using an image that has iptables.
 * @throws Error with what the rules' container said, when they could not be installed.
 */
export async function installFirewall(docker: Docker, image: string, resolverAddress: string | null, privateAllow: readonly string[] = []): Promise<void> {
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: [],
    Cmd: ['/bin/sh', '-c', firewallScript(resolverAddress, privateAllow)],
    Labels: { 'machine-platform.firewall': 'rules' },
    HostConfig: { NetworkMode: 'host', CapDrop: ['ALL'], CapAdd: ['NET_ADMIN', 'NET_RAW'], SecurityOpt: ['no-new-privileges'] },
  });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    if (StatusCode !== 0) {
      const logs = (await container.logs({ stdout: true, stderr: true })) as unknown as Buffer;
      throw new Error(`the firewall for machines could not be installed (exit ${StatusCode}): ${logs.toString('latin1').replace(/[\x00-\x08]/g, '').trim().slice(0, 300)}`);
    }
  } finally {
    await container.remove({ force: true }).catch(() => {});
  }
}
