import type { LookupAddress } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { BlockList, isIP, isIPv4 } from 'node:net';

/** IPv4 ranges that are not the public internet (IANA special-purpose registry). */
const V4_RANGES: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignment'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V6_RANGES: Array<[string, number, string]> = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['100::', 64, 'discard-only'],
  ['2001::', 32, 'Teredo'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
  ['64:ff9b:1::', 48, 'local NAT64'],
  ['fc00::', 7, 'unique local (private)'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

const v4Reasons = V4_RANGES.map(([network, prefix, reason]) => ({ list: blockList(network, prefix, 'ipv4'), reason }));
const v6Reasons = V6_RANGES.map(([network, prefix, reason]) => ({ list: blockList(network, prefix, 'ipv6'), reason }));

function blockList(network: string, prefix: number, family: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  list.addSubnet(network, prefix, family);
  return list;
}

/** Why an address may not receive webhooks, or null when it is a public address. */
export function forbiddenReason(address: string): string | null {
  const ip = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIPv4(ip)) return v4Reasons.find(({ list }) => list.check(ip, 'ipv4'))?.reason ?? null;
  if (isIP(ip) !== 6) return 'not an IP address';
  const groups = expandIPv6(ip);
  const embedded = embeddedIPv4(groups);
  if (embedded !== null) {
    const reason = forbiddenReason(embedded);
    return reason === null ? null : `${reason}, embedded in IPv6`;
  }
  return v6Reasons.find(({ list }) => list.check(ip, 'ipv6'))?.reason ?? null;
}

/** The eight 16-bit groups of an IPv6 address (dotted IPv4 tails converted). */
function expandIPv6(ip: string): number[] {
  let text = ip.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = text.slice(0, -dotted[1]!.length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = new Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  return [...headGroups, ...(tail === undefined ? [] : zeros), ...tailGroups].map((group) => parseInt(group, 16));
}

/**
 * IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible
 * (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
 */
function embeddedIPv4(g: number[]): string | null {
  const v4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const zeroUntil = (n: number) => g.slice(0, n).every((group) => group === 0);
  if (zeroUntil(5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (zeroUntil(4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (zeroUntil(6) && (g[6] !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((group) => group === 0)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return null;
}

export class RefusedTargetError extends Error {
  override name = 'RefusedTargetError';
}

/** What a refusal tells the person who runs the service and meant a receiver on this machine or network. */
export const ALLOW_PRIVATE_TARGETS_HINT = 'a receiver on this machine or a private network needs WEBHOOK_ALLOW_PRIVATE_TARGETS=on on the service (local development only)';

/** Hostnames that always mean this machine, refused before any lookup. */
export function isLocalHostname(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  return host === 'localhost' || host.endsWith('.localhost');
}

/** "a private address", "an unspecified address". */
function describeAddress(reason: string): string {
  return `${/^[aeiouIU]/.test(reason) ? 'an' : 'a'} ${reason} address`;
}

/** @throws RefusedTargetError when the URL's host is an IP literal or a name that cannot be public. */
export function checkHostLiteral(hostname: string): void {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (isLocalHostname(host)) throw new RefusedTargetError(`${hostname} is this machine`);
  if (isIP(host) !== 0) {
    const reason = forbiddenReason(host);
    if (reason !== null) throw new RefusedTargetError(`${host} is ${describeAddress(reason)}`);
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** Resolves every address of a host name (DNS, or a stand-in in tests). */
export type ResolveAll = (hostname: string, callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export interface DnsResolver {
  resolveAll: ResolveAll;
  /** Ends the queries under way (they fail); nothing is asked after. */
  close(): void;
}

export interface DnsResolverOptions {
  /** How long one resolution may take in all, tries and both families included. */
  timeoutMs: number;
  /** Nameservers (`host` or `host:port`) instead of the system's, those of /etc/resolv.conf. */
  servers?: string[];
  /** Milliseconds on a monotonic clock, for the cache's TTLs. */
  now?: () => number;
}

/** An answer is kept no longer than its TTL says, and no longer than this. */
const MAX_CACHE_TTL_MS = 10 * 60_000;
const CACHED_NAMES = 10_000;
/** RFC 6761: these names are this machine; no nameserver is asked about them. */
const LOOPBACK: LookupAddress[] = [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
/** c-ares tries each nameserver twice, the second try with twice the timeout: the two fit in a third and two thirds of the budget. */
const TRIES = 2;

function dnsError(code: 'ENOTFOUND' | 'ETIMEOUT' | 'EAI_AGAIN', hostname: string, detail: string = code): NodeJS.ErrnoException {
  return Object.assign(new Error(`DNS ${detail} ${hostname}`), { code, hostname });
}

/**
 * Webhook targets' names, resolved by c-ares (`dns.promises.Resolver`), which
 * waits on sockets: `dns.lookup` (getaddrinfo) holds one of libuv's four
 * threads for as long as a nameserver takes, and password hashing needs those
 * threads, so one account's stalling nameserver delayed every sign-in and every
 * delivery to a name. A resolution asks for the A and AAAA records at once and
 * gives up after `timeoutMs`; answers are cached for their TTL (at most ten
 * minutes), and concurrent resolutions of one name share their queries. Like
 * getaddrinfo it answers IP literals as they are and `localhost` names with
 * loopback; unlike it, it reads no /etc/hosts (the address checks then refuse
 * or allow what comes back, exactly as before).
 */
export function createDnsResolver(options: DnsResolverOptions): DnsResolver {
  const now = options.now ?? (() => performance.now());
  const resolver = new Resolver({ timeout: Math.max(1, Math.floor(options.timeoutMs / (2 ** TRIES - 1))), tries: TRIES });
  if (options.servers) resolver.setServers(options.servers);
  const cache = new Map<string, { addresses: LookupAddress[]; expiresAt: number }>();
  const underWay = new Map<string, Promise<LookupAddress[]>>();
  let closed = false;

  async function query(name: string): Promise<LookupAddress[]> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(dnsError('ETIMEOUT', name)), options.timeoutMs);
    });
    try {
      const [v4, v6] = await Promise.race([Promise.allSettled([resolver.resolve4(name, { ttl: true }), resolver.resolve6(name, { ttl: true })]), deadline]);
      const records = [
        ...(v4.status === 'fulfilled' ? v4.value.map((record) => ({ ...record, family: 4 })) : []),
        ...(v6.status === 'fulfilled' ? v6.value.map((record) => ({ ...record, family: 6 })) : []),
      ];
      if (records.length === 0) throw resolutionFailure(name, [v4, v6]);
      const addresses = records.map(({ address, family }) => ({ address, family }));
      const ttlMs = Math.min(MAX_CACHE_TTL_MS, ...records.map((record) => record.ttl * 1000));
      if (ttlMs > 0 && !closed) {
        if (cache.size >= CACHED_NAMES) cache.delete(cache.keys().next().value!);
        cache.set(name, { addresses, expiresAt: now() + ttlMs });
      }
      return addresses;
    } finally {
      clearTimeout(timer);
    }
  }

  const resolveAll: ResolveAll = (hostname, callback) => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    const family = isIP(name.replace(/^\[|\]$/g, ''));
    if (family !== 0) return callback(null, [{ address: name.replace(/^\[|\]$/g, ''), family }]);
    if (isLocalHostname(name)) return callback(null, LOOPBACK);
    if (closed) return callback(dnsError('EAI_AGAIN', name, 'resolver closed'), []);
    const cached = cache.get(name);
    if (cached !== undefined && cached.expiresAt > now()) return callback(null, cached.addresses);
    if (cached !== undefined) cache.delete(name);
    let pending = underWay.get(name);
    if (pending === undefined) {
      pending = query(name).finally(() => underWay.delete(name));
      underWay.set(name, pending);
    }
    pending.then((addresses) => callback(null, addresses), (error: NodeJS.ErrnoException) => callback(error, []));
  };

  return {
    resolveAll,
    close() {
      closed = true;
      cache.clear();
      resolver.cancel();
    },
  };
}

/** Both families failed: no such name (or no address) is ENOTFOUND; a nameserver that did not answer in time, ETIMEOUT; anything else, EAI_AGAIN. */
function resolutionFailure(name: string, results: Array<PromiseSettledResult<unknown>>): NodeJS.ErrnoException {
  const codes = results.map((result) => (result.status === 'rejected' ? (result.reason as NodeJS.ErrnoException).code : 'ENODATA'));
  if (codes.every((code) => code === 'ENOTFOUND' || code === 'ENODATA' || code === 'EBADNAME')) return dnsError('ENOTFOUND', name);
  if (codes.includes('ETIMEOUT')) return dnsError('ETIMEOUT', name);
  return dnsError('EAI_AGAIN', name, codes.join('/'));
}

export type SocketLookup = (hostname: string, options: { all?: boolean }, callback: LookupCallback) => void;

/**
 * A `lookup` for the socket: resolves every address of the host and, when
 * `check` is set, refuses the connection if any is forbidden. Either way the
 * socket gets exactly the addresses resolved here, so nothing can re-resolve
 * in between (no DNS-rebinding gap).
 */
function socketLookup(resolveAll: ResolveAll, check: boolean): SocketLookup {
  return (hostname, options, callback) => {
    resolveAll(hostname, (error, addresses) => {
      if (error) return callback(error, []);
      const refused = check ? addresses.find(({ address }) => forbiddenReason(address) !== null) : undefined;
      if (refused) {
        const refusal = new RefusedTargetError(`${hostname} resolves to ${refused.address}, ${describeAddress(forbiddenReason(refused.address)!)}`);
        return callback(refusal as NodeJS.ErrnoException, []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}

/** Checks every resolved address: the default. */
export const checkedLookup = (resolveAll: ResolveAll): SocketLookup => socketLookup(resolveAll, true);

/** Resolves without checking: private targets allowed (local development and tests). */
export const uncheckedLookup = (resolveAll: ResolveAll): SocketLookup => socketLookup(resolveAll, false);
