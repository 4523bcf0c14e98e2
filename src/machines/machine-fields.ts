import { invalidRequest } from '../http/errors.ts';
import { AUTO_STOP_MINUTES } from './activity.ts';
import { DEFAULT_IMAGE_NAME } from '../config.ts';
import { unknownImage, unknownSize } from './machines.errors.ts';
import { MACHINE_LIMITS } from './machines.schemas.ts';
import type { MachineView } from './machines.repository.ts';
import type { OnExpire } from './machines.tables.ts';
import { checkName } from './names.ts';
import type { ScreenSize } from '../providers/screen-size.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { checkNetworkPolicy, type NetworkPolicy } from '../providers/network-policy.ts';

export interface NewMachine {
  name: string;
  size?: string | undefined;
  externalId?: string | undefined;
  labels?: Record<string, string> | undefined;
  expiresAt?: string | undefined;
  onExpire?: OnExpire | undefined;
  /** A pool's name or id: take a warm machine from it. */
  pool?: string | undefined;
  /** The display's size. */
  screen?: ScreenSize | undefined;
  /** Environment of every command, process and terminal of the machine. */
  env?: Record<string, string> | undefined;
  /** A name of GET /api/images. */
  image?: string | undefined;
  /** Idle stop: minutes without activity before the machine is stopped; 0: never (default 15). */
  autoStopMinutes?: number | undefined;
  /** Its way out. */
  network?: { internet: boolean; allow?: string[] | undefined; deny?: string[] | undefined } | undefined;
  /** A template (id or name) to start from: its files, image and environment. */
  template?: string | undefined;
}


/** The machine response of create and token rotation: the token is in it only then. */
export interface MachineWithToken extends MachineView {
  mcpToken: string;
}

/** What a machine is given by its creator, checked. */
export interface MachineFields {
  name: string;
  size: string | undefined;
  externalId: string;
  labels: Record<string, string>;
  expiresAt: number | null;
  onExpire: OnExpire;
  screen: ScreenSize | null;
  env: Record<string, string>;
  image: string;
  autoStopMinutes: number;
  network: NetworkPolicy | null;
}

/** @throws AppError 400 for a blank or multi-line name, an unknown size, an expiry not in the future, a bad idle stop or network policy. */
export function checkMachineFields(provider: MachineProvider, input: NewMachine, now: number, images: readonly string[], defaultAutoStopMinutes: number, egress = true): MachineFields {
  const name = checkName(input.name);
  if (input.size !== undefined && !provider.sizes.includes(input.size)) throw unknownSize(provider.sizes);
  let expiresAt: number | null = null;
  if (input.expiresAt !== undefined) {
    expiresAt = Date.parse(input.expiresAt);
    if (Number.isNaN(expiresAt)) throw invalidRequest('expiresAt must be an ISO 8601 timestamp.');
    if (expiresAt <= now) throw invalidRequest('expiresAt must be in the future.');
  }
  // A pooled machine booted with the pool's screen already.
  if (input.pool !== undefined && input.screen !== undefined) throw invalidRequest('screen cannot be chosen for a machine taken from a pool: leave it out, or create the machine without pool.');
  if (input.pool !== undefined && input.env !== undefined) throw invalidRequest('env cannot be given to a machine taken from a pool: it was made before; create the machine without pool.');
  const env = checkEnv(input.env ?? {});
  if (input.image !== undefined && !images.includes(input.image)) throw unknownImage(images);
  if (input.template !== undefined && input.pool !== undefined) throw invalidRequest('template cannot be chosen for a machine taken from a pool: make a pool from the template (POST /api/pools {template}), or create the machine without pool.');
  if (input.template !== undefined && input.image !== undefined) throw invalidRequest('image cannot be chosen with template: a template starts from the image it was saved from.');
  if (input.pool !== undefined && input.image !== undefined) throw invalidRequest('image cannot be chosen for a machine taken from a pool: it was made before; create the machine without pool.');
  const autoStopMinutes = checkAutoStopMinutes(input.autoStopMinutes ?? defaultAutoStopMinutes);
  if (input.pool !== undefined && input.network !== undefined) throw invalidRequest('network cannot be given to a machine taken from a pool at create; set it after with PATCH /api/machines/{id}.');
  const network = input.network === undefined ? null : checkNetworkPolicy(input.network, egress);
  return { name, size: input.size, externalId: input.externalId ?? '', labels: input.labels ?? {}, expiresAt, onExpire: input.onExpire ?? 'stop', screen: input.screen ?? null, env, image: input.image ?? DEFAULT_IMAGE_NAME, autoStopMinutes, network };
}

/**
 * The idle stop's bounds, for callers that come without the HTTP schema (MCP).
 * @throws AppError 400 for anything but a whole number of minutes from 0 to 10,080.
 */
export function checkAutoStopMinutes(minutes: number): number {
  if (!Number.isInteger(minutes) || minutes < AUTO_STOP_MINUTES.min || minutes > AUTO_STOP_MINUTES.max) {
    throw invalidRequest(`autoStopMinutes must be a whole number from ${AUTO_STOP_MINUTES.min} (never) to ${AUTO_STOP_MINUTES.max} (a week).`);
  }
  return minutes;
}

/**
 * What the schemas cannot say (MCP callers come without them): the names'
 * shape, the count, values' size in bytes and no NUL (an environment cannot
 * hold one). Messages name the variable, never its value.
 * @throws AppError 400.
 */
function checkEnv(env: Record<string, string>): Record<string, string> {
  const names = Object.keys(env);
  if (names.length > MACHINE_LIMITS.envVariables) throw invalidRequest(`env has ${names.length} variables; at most ${MACHINE_LIMITS.envVariables}.`);
  const pattern = new RegExp(MACHINE_LIMITS.envNamePattern);
  for (const name of names) {
    if (!pattern.test(name) || name.length > MACHINE_LIMITS.envName) throw invalidRequest(`env name ${JSON.stringify(name.slice(0, 100))} must match [A-Za-z_][A-Za-z0-9_]* (at most ${MACHINE_LIMITS.envName} characters).`);
    const value = env[name]!;
    if (typeof value !== 'string') throw invalidRequest(`env ${name} must be a string.`);
    if (Buffer.byteLength(value, 'utf8') > MACHINE_LIMITS.envValueBytes) throw invalidRequest(`env ${name} is over 32 KiB.`);
    if (value.includes('\0')) throw invalidRequest(`env ${name} holds a NUL character, which no environment can.`);
  }
  return env;
}
