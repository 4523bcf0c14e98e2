import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { isIP } from 'node:net';

export type Role = 'api' | 'worker' | 'all';

export interface PasswordHashCost {
  /** argon2id memory in KiB */
  memoryKiB: number;
  passes: number;
  parallelism: number;
}

export interface WebhookConfig {
  timeoutMs: number;
  retryDelaysMs: readonly number[];
  maxAttempts: number;
  allowPrivateTargets: boolean;
  /** WEBHOOK_DISABLE_AFTER: an endpoint failing this long (a failure in each fifth of it, no success) is disabled. */
  disableAfterMs: number;
}

export interface RetentionConfig {
  /** RETENTION: events, finished deliveries and finished runs older than this are deleted. */
  periodMs: number;
}

/** What a machine of one size may use, enforced by the engine. */
export interface MachineSize {
  cpus: number;
  memoryBytes: number;
  /** Processes (and threads) at once. */
  pids: number;
  /** The machine's disk: what it may write (on btrfs with full quota groups, its image's files too). Enforced only where the engine can (disk-limits.ts). */
  diskBytes: number;
}

export interface MachinesConfig {
  /**
   * MACHINE_PROVIDER: `docker` runs each machine as a container; `simulated` executes nothing; `auto` (the
   * default) is Docker where an engine answers at start-up, else simulated (machines/provider-choice.ts).
   */
  provider: 'auto' | 'simulated' | 'docker';
  /** How long the simulated provider takes to boot a machine. */
  bootMs: number;
  /** MACHINE_SIZES, in the order given; the first is the default, unless one is named `small`. */
  sizes: Readonly<Record<string, MachineSize>>;
  /** MACHINE_IMAGE: the image of every machine (docker) that picks no other: the image named `default`. */
  image: string;
  /** MACHINE_IMAGES: the other images a machine may be created from, by the name users pick (`POST /api/machines {image}`). */
  images: Readonly<Record<string, string>>;
  /** MACHINE_EGRESS: whether machines may reach the internet (never the host, its services or private networks). */
  egress: boolean;
  /**
   * MACHINE_DNS_SERVERS: where the machines' resolver sends their lookups; empty, the engine host's own
   * resolvers (its /etc/resolv.conf), which machines could not reach themselves when they are private.
   */
  dnsServers: readonly string[];
  /** MACHINE_AUTO_STOP_MINUTES: the idle stop of machines created without `autoStopMinutes` (default 15; 0: never). */
  autoStopMinutes: number;
  /**
   * MACHINE_PRIVATE_ALLOW: private IPv4 ranges (CIDRs) machines may reach after all, under their own network
   * policy; every other private, loopback, link-local and reserved range stays out of reach whatever a policy says.
   */
  privateAllow: readonly string[];
  /** MACHINE_HOSTS: the hosts (engines) added or updated at start-up, by name; none: the one host `local` (DOCKER_HOST). */
  hosts: readonly { name: string; address: string }[];
  /** MACHINE_HOST_CERTS: a folder with one folder per host name of `ca.pem`, `cert.pem`, `key.pem`, for tcp:// hosts over TLS. */
  hostCertsDir: string | null;
  /** MACHINE_HOST_LOST_AFTER_MS: how long a host's engine may not answer before it is lost. */
  hostLostAfterMs: number;
  /** MACHINE_CPU_OVERCOMMIT: how many machine CPUs a host takes per CPU of its own (memory is never overcommitted). */
  cpuOvercommit: number;
}

/** The service's own version: the default image's tag. */
export const SERVICE_VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
/** The image `npm run machine-image` builds. */
export const DEFAULT_MACHINE_IMAGE = `machine-platform/base:${SERVICE_VERSION}`;
const DEFAULT_MACHINE_SIZES = 'small=1/1g/512/10g,medium=2/2g/1024/20g,large=4/4g/2048/40g';
/** A size that names no disk gets this one. */
const DEFAULT_DISK_BYTES = 10 * 1024 ** 3;

/**
 * Speed techniques, each on by default and each measured (bench/RESULTS.md):
 * the service behaves the same with any of them off, only slower.
 */
/** Encryption at rest of users' secrets (a machine's environment): shared/sealing.ts. */
export interface SecretsConfig {
  /** SECRETS_KEY's 32 bytes, in base64 (the config stays plain, frozen data); null: generated into `keyFile`. */
  key: string | null;
  /** Where the generated key is kept: beside the SQLite database, or ./data with PostgreSQL; null for a database in memory. */
  keyFile: string | null;
}

export interface PerformanceConfig {
  /** PostgreSQL: statements that repeat are sent as named prepared statements, parsed and planned once per connection. */
  pgPreparedStatements: boolean;
  /** Webhook HTTP attempts run on a worker thread of their own, beside the service's thread (default: on with SQLite, off with PostgreSQL). */
  webhookSenderThread: boolean;
}

export interface BillingConfig {
  /** BILLING: off makes machines free (no metering, welcome credit, charges or 402s). */
  enabled: boolean;
  /** MACHINE_PRICES: micro-dollars per hour, by machine size. */
  pricesMicrosPerHour: Readonly<Record<string, number>>;
  /** MACHINE_PRICES' second figure (`size=running/paused`): a paused machine's price per hour; a tenth of running's when not given. */
  pausedPricesMicrosPerHour: Readonly<Record<string, number>>;
  /** METERING_INTERVAL: a running machine is charged at least this often. */
  meteringIntervalMs: number;
  /** WELCOME_CREDIT, in micro-dollars. */
  welcomeCreditMicros: number;
  /** LOW_BALANCE: the balance under which one mail warns, in micro-dollars. */
  lowBalanceMicros: number;
  /** PAYMENT_PROVIDER: `simulated` (built in) behaves like a card processor's test mode. */
  paymentProvider: 'simulated';
}

export interface McpConfig {
  /** Tool calls (`tools/call`) per credential per one-minute window; an OAuth grant's tokens count as one credential. */
  toolCallsPerMinute: number;
}

export interface JobsConfig {
  /** How often a process looks for due jobs that nobody announced to it (the safety net under wake-ups). */
  pollIntervalMs: number;
}

export interface Config {
  port: number;
  host: string;
  /** The service's own origin, without a trailing slash, e.g. `http://localhost:3000`. */
  publicUrl: string;
  /** Where a machine's port is served, `{port}` and `{id}` in its host (e.g. `http://{port}-{id}.localhost:3000`). */
  previewUrl: string;
  /** True when PUBLIC_URL is https: cookies become `__Host-` and `Secure`. */
  secureCookies: boolean;
  databaseUrl: string;
  smtpUrl: string | null;
  mailDir: string;
  role: Role;
  trustProxy: boolean;
  rateLimit: boolean;
  logLevel: string;
  webhook: WebhookConfig;
  machines: MachinesConfig;
  jobs: JobsConfig;
  billing: BillingConfig;
  mcp: McpConfig;
  retention: RetentionConfig;
  performance: PerformanceConfig;
  secrets: SecretsConfig;
  passwordHashCost: PasswordHashCost;
}

/** OWASP's minimum for argon2id: m=19 MiB, t=2, p=1. */
export const DEFAULT_PASSWORD_HASH_COST: PasswordHashCost = { memoryKiB: 19 * 1024, passes: 2, parallelism: 1 };

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

/**
 * Reads and validates the environment once.
 * @throws ConfigError naming the first bad variable.
 */
export function loadConfig(env: Env = process.env): Readonly<Config> {
  const port = parsePort(env.PORT);
  const publicUrl = parsePublicUrl(env.PUBLIC_URL ?? `http://localhost:${port}`);
  const databaseUrl = parseDatabaseUrl(env.DATABASE_URL ?? 'sqlite:./data/service.db');
  const machines: MachinesConfig = {
    provider: parseMachineProvider(env.MACHINE_PROVIDER),
    bootMs: parseInteger('MACHINE_BOOT_MS', env.MACHINE_BOOT_MS, 2000, 0, 600_000),
    sizes: parseSizes(env.MACHINE_SIZES || DEFAULT_MACHINE_SIZES),
    image: nonEmpty('MACHINE_IMAGE', env.MACHINE_IMAGE ?? DEFAULT_MACHINE_IMAGE),
    images: parseImages(env.MACHINE_IMAGES),
    egress: parseSwitch('MACHINE_EGRESS', env.MACHINE_EGRESS, true),
    dnsServers: parseDnsServers(env.MACHINE_DNS_SERVERS),
    autoStopMinutes: parseInteger('MACHINE_AUTO_STOP_MINUTES', env.MACHINE_AUTO_STOP_MINUTES, 15, 0, 10_080),
    privateAllow: parsePrivateAllow(env.MACHINE_PRIVATE_ALLOW),
    hosts: parseHosts(env.MACHINE_HOSTS),
    hostCertsDir: env.MACHINE_HOST_CERTS ? resolve(env.MACHINE_HOST_CERTS) : null,
    hostLostAfterMs: parseInteger('MACHINE_HOST_LOST_AFTER_MS', env.MACHINE_HOST_LOST_AFTER_MS, 30_000, 1000, 3_600_000),
    cpuOvercommit: parseNumber('MACHINE_CPU_OVERCOMMIT', env.MACHINE_CPU_OVERCOMMIT, 4, 1, 64),
  };
  const config: Config = {
    port,
    host: nonEmpty('HOST', env.HOST ?? '127.0.0.1'),
    publicUrl,
    previewUrl: parsePreviewUrl(env.PREVIEW_URL || `http://{port}-{id}.localhost:${port}`, publicUrl),
    secureCookies: publicUrl.startsWith('https:'),
    databaseUrl,
    smtpUrl: parseSmtpUrl(env.SMTP_URL),
    mailDir: resolve(nonEmpty('MAIL_DIR', env.MAIL_DIR ?? './data/mail')),
    role: parseRole(env.ROLE),
    trustProxy: parseSwitch('TRUST_PROXY', env.TRUST_PROXY, false),
    rateLimit: parseSwitch('RATE_LIMIT', env.RATE_LIMIT, true),
    logLevel: parseLogLevel(env.LOG_LEVEL),
    webhook: {
      timeoutMs: parseInteger('WEBHOOK_TIMEOUT_MS', env.WEBHOOK_TIMEOUT_MS, 10_000, 1, 120_000),
      retryDelaysMs: parseDurationList('WEBHOOK_RETRY_DELAYS', env.WEBHOOK_RETRY_DELAYS ?? '30s,1m,2m,4m,8m,16m,32m,60m'),
      maxAttempts: parseInteger('WEBHOOK_MAX_ATTEMPTS', env.WEBHOOK_MAX_ATTEMPTS, 8, 1, 100),
      allowPrivateTargets: parseSwitch('WEBHOOK_ALLOW_PRIVATE_TARGETS', env.WEBHOOK_ALLOW_PRIVATE_TARGETS, false),
      disableAfterMs: parseDuration('WEBHOOK_DISABLE_AFTER', env.WEBHOOK_DISABLE_AFTER, 5 * 86_400_000, 5_000),
    },
    retention: {
      periodMs: parseDuration('RETENTION', env.RETENTION, 30 * 86_400_000, 10_000),
    },
    machines,
    jobs: {
      // MACHINE_WORKER_INTERVAL_MS is its former name, still read.
      pollIntervalMs: env.JOBS_POLL_INTERVAL_MS
        ? parseInteger('JOBS_POLL_INTERVAL_MS', env.JOBS_POLL_INTERVAL_MS, 1000, 10, 3_600_000)
        : parseInteger('MACHINE_WORKER_INTERVAL_MS', env.MACHINE_WORKER_INTERVAL_MS, 1000, 10, 3_600_000),
    },
    billing: {
      enabled: parseSwitch('BILLING', env.BILLING, true),
      ...parsePrices(env.MACHINE_PRICES ?? defaultPrices(machines.sizes), Object.keys(machines.sizes)),
      meteringIntervalMs: parseDuration('METERING_INTERVAL', env.METERING_INTERVAL, 60_000, 100, 3_600_000),
      welcomeCreditMicros: parseUsd('WELCOME_CREDIT', env.WELCOME_CREDIT ?? '10.00'),
      lowBalanceMicros: parseUsd('LOW_BALANCE', env.LOW_BALANCE ?? '1.00'),
      paymentProvider: parsePaymentProvider(env.PAYMENT_PROVIDER),
    },
    mcp: {
      toolCallsPerMinute: parseInteger('MCP_TOOL_CALLS_PER_MINUTE', env.MCP_TOOL_CALLS_PER_MINUTE, 600, 1, 1_000_000),
    },
    performance: {
      pgPreparedStatements: parseSwitch('PG_PREPARED_STATEMENTS', env.PG_PREPARED_STATEMENTS, true),
      // On by default where it was measured to pay: with SQLite the service's own thread is the limit; with PostgreSQL the database was.
      webhookSenderThread: parseSwitch('WEBHOOK_SENDER_THREAD', env.WEBHOOK_SENDER_THREAD, databaseUrl.startsWith('sqlite:')),
    },
    secrets: { key: parseSecretsKey(env.SECRETS_KEY), keyFile: secretsKeyFile(databaseUrl) },
    passwordHashCost: DEFAULT_PASSWORD_HASH_COST,
  };
  return deepFreeze(config);
}

function fail(variable: string, problem: string, value: string | undefined): never {
  throw new ConfigError(`${variable} ${problem} (got ${JSON.stringify(value)})`);
}

function nonEmpty(variable: string, value: string): string {
  if (value.trim() === '') fail(variable, 'must not be empty', value);
  return value;
}

/** Not 0: "any free port" would put the service where no client, and no PUBLIC_URL, can find it. */
function parsePort(value: string | undefined): number {
  return parseInteger('PORT', value, 3000, 1, 65535);
}

/** Surrounding spaces are forgiven, as for switches (a value pasted from a .env file). */
function parseInteger(variable: string, value: string | undefined, fallback: number, min: number, max: number): number {
  const text = value?.trim();
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text)) fail(variable, 'must be a whole number', value);
  const parsed = Number(text);
  if (parsed < min || parsed > max) fail(variable, `must be between ${min} and ${max}`, value);
  return parsed;
}

function parseNumber(variable: string, value: string | undefined, fallback: number, min: number, max: number): number {
  const text = value?.trim();
  if (text === undefined || text === '') return fallback;
  if (!/^\d+(\.\d+)?$/.test(text)) fail(variable, 'must be a number', value);
  const parsed = Number(text);
  if (parsed < min || parsed > max) fail(variable, `must be between ${min} and ${max}`, value);
  return parsed;
}

const SWITCH_VALUES: Record<string, boolean> = {
  on: true, true: true, yes: true, '1': true,
  off: false, false: false, no: false, '0': false,
};

function parseSwitch(variable: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  const parsed = SWITCH_VALUES[value.trim().toLowerCase()];
  if (parsed === undefined) fail(variable, 'must be on or off', value);
  return parsed;
}

function parseRole(value: string | undefined): Role {
  if (value === undefined || value === '') return 'all';
  if (value === 'api' || value === 'worker' || value === 'all') return value;
  return fail('ROLE', 'must be api, worker or all', value);
}

function parseMachineProvider(value: string | undefined): MachinesConfig['provider'] {
  if (value === undefined || value === '' || value === 'auto') return 'auto';
  if (value === 'docker' || value === 'simulated') return value;
  return fail('MACHINE_PROVIDER', 'must be auto, docker or simulated', value);
}

const MEMORY_UNITS: Record<string, number> = { k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** `small=1/1g/512/10g,…`: CPUs (fractions allowed), memory (k, m or g), processes, and the disk (m, g or t; 10g when left out). */
function parseSizes(value: string): Record<string, MachineSize> {
  const sizes: Record<string, MachineSize> = {};
  const shape = 'must look like small=1/1g/512/10g,medium=2/2g/1024/20g (name=cpus/memory/processes/disk)';
  for (const item of value.split(',')) {
    const match = /^\s*([a-z][a-z0-9-]{0,31})\s*=\s*(\d+(?:\.\d+)?)\/(\d+)([kmg])\/(\d+)(?:\/(\d+)([mgt]))?\s*$/i.exec(item);
    if (!match) return fail('MACHINE_SIZES', shape, value);
    const [, name, cpus, amount, unit, pids, disk, diskUnit] = match;
    if (sizes[name!] !== undefined) fail('MACHINE_SIZES', `names "${name}" twice`, value);
    const size = {
      cpus: Number(cpus),
      memoryBytes: Number(amount) * MEMORY_UNITS[unit!.toLowerCase()]!,
      pids: Number(pids),
      diskBytes: disk === undefined ? DEFAULT_DISK_BYTES : Number(disk) * MEMORY_UNITS[diskUnit!.toLowerCase()]!,
    };
    if (size.diskBytes < 512 * 1024 ** 2 || size.diskBytes > 16 * 1024 ** 4) fail('MACHINE_SIZES', `gives "${name}" ${disk}${diskUnit} of disk (512m to 16t)`, value);
    if (size.cpus < 0.1 || size.cpus > 64) fail('MACHINE_SIZES', `gives "${name}" ${cpus} CPUs (0.1 to 64)`, value);
    if (size.memoryBytes < 64 * 1024 ** 2 || size.memoryBytes > 256 * 1024 ** 3) fail('MACHINE_SIZES', `gives "${name}" ${amount}${unit} of memory (64m to 256g)`, value);
    if (size.pids < 16 || size.pids > 65_536) fail('MACHINE_SIZES', `gives "${name}" ${pids} processes (16 to 65536)`, value);
    sizes[name!] = size;
  }
  return sizes;
}

/** MACHINE_PRIVATE_ALLOW: IPv4 CIDRs (or addresses, a /32), comma-separated, written as their network (`10.1.2.0/24`, not `10.1.2.3/24`). */
function parsePrivateAllow(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  const ranges = value.split(',').map((range) => range.trim());
  for (const range of ranges) {
    const cidr = parseIpv4Cidr(range);
    if (cidr === null) fail('MACHINE_PRIVATE_ALLOW', `must be IPv4 CIDRs separated by commas ("${range}" is not one, or has bits set past its prefix)`, value);
  }
  return ranges.map((range) => (range.includes('/') ? range : `${range}/32`));
}

/** An IPv4 CIDR (or a bare address, a /32) whose address is its network; null for anything else. */
export function parseIpv4Cidr(text: string): { address: number; prefix: number } | null {
  const match = /^(\d{1,3}(?:\.\d{1,3}){3})(?:\/(\d{1,2}))?$/.exec(text);
  if (match === null || isIP(match[1]!) !== 4) return null;
  const prefix = match[2] === undefined ? 32 : Number(match[2]);
  if (prefix > 32) return null;
  const address = match[1]!.split('.').reduce((sum, octet) => sum * 256 + Number(octet), 0);
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  if (((address & ~mask) >>> 0) !== 0) return null;
  return { address, prefix };
}

/** MACHINE_DNS_SERVERS: IPv4 addresses, comma-separated (an IPv6 one would need the machines' network to have IPv6). */
function parseDnsServers(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  const servers = value.split(',').map((server) => server.trim());
  for (const server of servers) {
    if (isIP(server) !== 4) fail('MACHINE_DNS_SERVERS', `must be IPv4 addresses separated by commas ("${server}" is not one)`, value);
  }
  return servers;
}

/** The built-in prices, for the built-in sizes; sizes of one's own need MACHINE_PRICES. */
function defaultPrices(sizes: Record<string, MachineSize>): string {
  const builtIn: Record<string, string> = { small: '0.05', medium: '0.10', large: '0.20' };
  const names = Object.keys(sizes);
  if (names.every((name) => builtIn[name] !== undefined)) return names.map((name) => `${name}=${builtIn[name]}`).join(',');
  return fail('MACHINE_PRICES', `must price the sizes MACHINE_SIZES names (${names.join(', ')})`, undefined);
}

function parsePaymentProvider(value: string | undefined): BillingConfig['paymentProvider'] {
  if (value === undefined || value === '' || value === 'simulated') return 'simulated';
  return fail('PAYMENT_PROVIDER', 'must be simulated (the only built-in payment provider)', value);
}


/** USD with at most six decimals, as integer micro-dollars (never through a float). */
function parseUsd(variable: string, value: string): number {
  const match = /^(\d{1,9})(?:\.(\d{1,6}))?$/.exec(value.trim());
  if (!match) return fail(variable, 'must be an amount in USD like 10.00 (at most six decimals)', value);
  return Number(match[1]) * 1_000_000 + Number((match[2] ?? '').padEnd(6, '0'));
}

/**
 * MACHINE_PRICES names exactly the machine sizes (MACHINE_SIZES), each
 * `size=running` or `size=running/paused`; a paused price not
 * given is a tenth of the running one, rounded to the micro-dollar.
 */
function parsePrices(value: string, sizes: readonly string[]): Pick<BillingConfig, 'pricesMicrosPerHour' | 'pausedPricesMicrosPerHour'> {
  const running: Record<string, number> = {};
  const paused: Record<string, number> = {};
  const shape = 'must look like small=0.05,medium=0.10/0.01,large=0.20 (USD per hour running, optionally /paused)';
  for (const item of value.split(',')) {
    const [size, prices, extra] = item.split('=').map((part) => part.trim());
    if (!size || prices === undefined || extra !== undefined) fail('MACHINE_PRICES', shape, value);
    if (!sizes.includes(size)) fail('MACHINE_PRICES', `has an unknown size "${size}" (sizes: ${sizes.join(', ')})`, value);
    const [runningPrice, pausedPrice, more] = prices.split('/').map((part) => part.trim());
    if (runningPrice === undefined || more !== undefined || pausedPrice === '') fail('MACHINE_PRICES', shape, value);
    running[size] = parseUsd('MACHINE_PRICES', runningPrice);
    paused[size] = pausedPrice === undefined ? Math.round(running[size] / 10) : parseUsd('MACHINE_PRICES', pausedPrice);
  }
  const missing = sizes.filter((size) => running[size] === undefined);
  if (missing.length > 0) fail('MACHINE_PRICES', `must price every size (missing ${missing.join(', ')})`, value);
  return { pricesMicrosPerHour: running, pausedPricesMicrosPerHour: paused };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function parseLogLevel(value: string | undefined): string {
  if (value === undefined || value === '') return 'info';
  if (!LOG_LEVELS.includes(value)) fail('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`, value);
  return value;
}

function parsePublicUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return fail('PUBLIC_URL', 'must be an absolute http(s) URL', value);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('PUBLIC_URL', 'must be an http or https URL', value);
  if (url.search || url.hash || url.username || url.password) fail('PUBLIC_URL', 'must not carry a query, fragment or credentials', value);
  if (url.pathname !== '/') fail('PUBLIC_URL', 'must be an origin without a path', value);
  return url.origin;
}

/**
 * A template whose host carries `{port}` and `{id}` (a wildcard domain), on
 * another host than PUBLIC_URL's: a preview is never served on the dashboard's
 * origin, and its cookies (host-only) never reach it.
 */
function parsePreviewUrl(value: string, publicUrl: string): string {
  let url: URL;
  try {
    url = new URL(value.replace('{port}', 'port-placeholder').replace('{id}', 'id-placeholder'));
  } catch {
    return fail('PREVIEW_URL', 'must be an absolute http(s) URL with {port} and {id} in its host', value);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('PREVIEW_URL', 'must be an http or https URL', value);
  if (!url.hostname.includes('port-placeholder') || !url.hostname.includes('id-placeholder')) fail('PREVIEW_URL', 'must carry {port} and {id} in its host, e.g. https://{port}-{id}.preview.example.com', value);
  if (url.pathname !== '/' || url.search || url.hash || url.username || url.password) fail('PREVIEW_URL', 'must be an origin without a path, query or credentials', value);
  if (!/^[a-z0-9.-]+$/.test(url.hostname.replace('port-placeholder', '').replace('id-placeholder', ''))) fail('PREVIEW_URL', 'must have a DNS host name around {port} and {id}', value);
  if (url.hostname === new URL(publicUrl).hostname) fail('PREVIEW_URL', "must not be PUBLIC_URL's host", value);
  return url.origin.replace('port-placeholder', '{port}').replace('id-placeholder', '{id}');
}

function parseDatabaseUrl(value: string): string {
  if (value.startsWith('sqlite:') && value.length > 'sqlite:'.length) return value;
  if (value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    try {
      new URL(value);
      return value;
    } catch {
      return fail('DATABASE_URL', 'is not a valid postgres:// URL', value);
    }
  }
  return fail('DATABASE_URL', 'must be sqlite:PATH, sqlite::memory: or postgres://…', value);
}

/** The name of MACHINE_IMAGE among the images users pick from. */
export const DEFAULT_IMAGE_NAME = 'default';

/** `name=image,…`: names of lower-case letters, digits and `-` (1–50; not `default`, MACHINE_IMAGE's), images as the engine names them. */
/** A host's name: what operators type and machines record. */
export const HOST_NAME = /^[a-z0-9][a-z0-9-]{0,39}$/;

/** An engine's address as hosts take it. */
export function checkHostAddress(address: string): string | null {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol === 'unix:') return url.pathname.startsWith('/') ? null : 'needs an absolute path (unix:///run/docker.sock)';
  if (url.protocol === 'tcp:') return url.hostname !== '' ? null : 'needs a host (tcp://host:2376)';
  if (url.protocol === 'ssh:') return url.hostname !== '' ? null : 'needs a host (ssh://user@host)';
  return 'must start with unix://, tcp:// or ssh://';
}

function parseHosts(value: string | undefined): { name: string; address: string }[] {
  if (value === undefined || value.trim() === '') return [];
  const hosts: { name: string; address: string }[] = [];
  for (const entry of value.split(',')) {
    const match = /^\s*([^=\s]+)=(\S+)\s*$/.exec(entry);
    if (!match) return fail('MACHINE_HOSTS', 'must be name=address,… (unix:///path, tcp://host:port or ssh://user@host)', value);
    const [, name, address] = match;
    if (!HOST_NAME.test(name!)) fail('MACHINE_HOSTS', `has a bad host name "${name}" (a-z, 0-9 and -, at most 40)`, value);
    const problem = checkHostAddress(address!);
    if (problem !== null) fail('MACHINE_HOSTS', `gives "${name}" an address that ${problem}`, value);
    if (hosts.some((host) => host.name === name)) fail('MACHINE_HOSTS', `names "${name}" twice`, value);
    hosts.push({ name: name!, address: address! });
  }
  return hosts;
}

function parseImages(value: string | undefined): Record<string, string> {
  const images: Record<string, string> = {};
  if (value === undefined || value.trim() === '') return images;
  for (const entry of value.split(',')) {
    const match = /^\s*([a-z0-9][a-z0-9-]{0,49})=(\S+)\s*$/.exec(entry);
    if (!match) return fail('MACHINE_IMAGES', 'must be name=image,… (names of a-z, 0-9 and -, at most 50)', value);
    const [, name, image] = match;
    if (name === DEFAULT_IMAGE_NAME) fail('MACHINE_IMAGES', `cannot name "${DEFAULT_IMAGE_NAME}": that is MACHINE_IMAGE`, value);
    if (images[name!] !== undefined) fail('MACHINE_IMAGES', `names "${name}" twice`, value);
    images[name!] = image!;
  }
  return images;
}

/** 32 bytes, in base64 or hex; the value itself is never echoed. */
function parseSecretsKey(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  const trimmed = value.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : /^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed) ? Buffer.from(trimmed, 'base64') : null;
  if (key?.length !== 32) throw new ConfigError('SECRETS_KEY must be 32 bytes in base64 or hex (e.g. `openssl rand -base64 32`)');
  return key.toString('base64');
}

function secretsKeyFile(databaseUrl: string): string | null {
  if (databaseUrl === 'sqlite::memory:') return null;
  const folder = databaseUrl.startsWith('sqlite:') ? dirname(resolve(databaseUrl.slice('sqlite:'.length))) : resolve('./data');
  return join(folder, 'secrets.key');
}

function parseSmtpUrl(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  try {
    const url = new URL(value);
    if ((url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== '') return value;
  } catch {
    // reported below
  }
  return fail('SMTP_URL', 'must be an smtp:// or smtps:// URL with a host', value);
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** One duration with a unit (`30d`, `12h`, `90m`, `30s`, `500ms`), from `min` to `max` milliseconds. */
function parseDuration(variable: string, value: string | undefined, fallback: number, min: number, max = Number.POSITIVE_INFINITY): number {
  const text = value?.trim();
  if (text === undefined || text === '') return fallback;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text);
  if (!match) return fail(variable, 'must be a duration like 30d, 12h or 90m (units ms, s, m, h, d)', value);
  const parsed = Math.round(Number(match[1]) * (match[2] === 'd' ? 86_400_000 : DURATION_UNITS[match[2]!]!));
  if (parsed < min) fail(variable, `must be at least ${min < 1000 ? `${min} ms` : `${min / 1000} s`}`, value);
  if (parsed > max) fail(variable, `must be at most ${max / 60_000} min`, value);
  return parsed;
}

/** Parses `30s,1m,2m` into milliseconds. */
export function parseDurationList(variable: string, value: string): number[] {
  const items = value.split(',').map((item) => item.trim());
  if (items.length === 0 || items.some((item) => item === '')) fail(variable, 'must be a comma-separated list of durations like 30s,1m', value);
  return items.map((item) => {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(item);
    if (!match) return fail(variable, `has a bad duration "${item}" (use ms, s, m or h)`, value);
    return Math.round(Number(match[1]) * DURATION_UNITS[match[2]!]!);
  });
}

function deepFreeze<T extends object>(value: T): Readonly<T> {
  for (const child of Object.values(value)) {
    if (child !== null && typeof child === 'object') deepFreeze(child);
  }
  return Object.freeze(value);
}
