import { Type } from 'typebox';
import { parseIpv4Cidr } from '../config.ts';
import { invalidRequest } from '../http/errors.ts';

/**
 * A machine's egress policy: `internet` opens every public
 * address but the `deny` ranges; without it, only the `allow` entries
 * (CIDRs, and domain names whose answered addresses become reachable).
 * Private, loopback, link-local and the service's own addresses stay out of
 * reach either way; MACHINE_PRIVATE_ALLOW alone opens private ranges.
 */
export interface NetworkPolicy {
  internet: boolean;
  allow: string[];
  deny: string[];
}

export const NETWORK_LIMITS = { entries: 50, entry: 253 } as const;

export const NetworkPolicySchema = Type.Object(
  {
    internet: Type.Boolean({ description: 'true: every public address except `deny`; false: only what `allow` lists' }),
    allow: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: NETWORK_LIMITS.entry }), {
        maxItems: NETWORK_LIMITS.entries,
        description: 'With internet false: IPv4 CIDRs and domain names (`*.example.org` for the names under it) the machine may reach; a domain resolves, and its answered addresses are reachable, only when listed',
      }),
    ),
    deny: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 18 }), { maxItems: NETWORK_LIMITS.entries, description: 'IPv4 CIDRs the machine may never reach, whatever else is allowed' })),
  },
  { additionalProperties: false, description: `The machine's way out: at most ${NETWORK_LIMITS.entries} entries in allow and deny together. Private, loopback and link-local addresses stay out of reach whatever it says` },
);

/** What answers show for a machine that was given no policy: the operator's default (MACHINE_EGRESS). */
export function defaultNetworkPolicy(egress: boolean): NetworkPolicy {
  return { internet: egress, allow: [], deny: [] };
}

/** A domain name as an allow entry: letters, digits, `-` and `_` in labels of at most 63, at least two labels, an optional `*.` in front. */
function isDomain(entry: string): boolean {
  const name = entry.startsWith('*.') ? entry.slice(2) : entry;
  if (name.length > 253 || !name.includes('.')) return false;
  return name.split('.').every((label) => /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/.test(label));
}

/**
 * Checks a policy as given (MCP callers come without the schemas), answering
 * it normalised: lower-case domains without a trailing dot, bare addresses as
 * /32. Nothing is saved or applied before it passes.
 * @throws AppError 400 naming the first bad entry.
 */
export function checkNetworkPolicy(input: { internet: boolean; allow?: string[] | undefined; deny?: string[] | undefined }, egress: boolean): NetworkPolicy {
  const allow = input.allow ?? [];
  const deny = input.deny ?? [];
  if (allow.length + deny.length > NETWORK_LIMITS.entries) throw invalidRequest(`network has ${allow.length + deny.length} entries in allow and deny; at most ${NETWORK_LIMITS.entries}.`);
  if (input.internet && allow.length > 0) throw invalidRequest('network.allow applies only with internet false (with internet true every public address is open already): drop allow, or set internet to false.');
  if (!egress && (input.internet || allow.length > 0)) throw invalidRequest('This service gives machines no way out (MACHINE_EGRESS is off): a network policy cannot open one.');
  const cidr = (entry: string) => {
    const parsed = parseIpv4Cidr(entry);
    return parsed === null ? null : `${entry.split('/')[0]}/${parsed.prefix}`;
  };
  const checkedAllow = allow.map((entry) => {
    const asCidr = cidr(entry);
    if (asCidr !== null) return asCidr;
    const domain = entry.toLowerCase().replace(/\.$/, '');
    if (!isDomain(domain)) throw invalidRequest(`network.allow entry ${JSON.stringify(entry.slice(0, 100))} is neither an IPv4 CIDR (203.0.113.0/24) nor a domain name (pypi.org, *.pypi.org).`);
    return domain;
  });
  const checkedDeny = deny.map((entry) => {
    const asCidr = cidr(entry);
    if (asCidr === null) throw invalidRequest(`network.deny entry ${JSON.stringify(entry.slice(0, 100))} is not an IPv4 CIDR (203.0.113.0/24, with no bits set past its prefix).`);
    return asCidr;
  });
  return { internet: input.internet, allow: [...new Set(checkedAllow)], deny: [...new Set(checkedDeny)] };
}
