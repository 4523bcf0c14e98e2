import { invalidRequest } from '../http/errors.ts';
import { unknownSize } from './machines.errors.ts';
import type { MachineView } from './machines.repository.ts';
import type { OnExpire } from './machines.tables.ts';
import { checkName } from './names.ts';
import type { ScreenSize } from './screen-size.ts';
import type { MachineProvider } from './provider.ts';

export interface NewMachine {
  name: string;
  size?: string | undefined;
  externalId?: string | undefined;
  labels?: Record<string, string> | undefined;
  expiresAt?: string | undefined;
  onExpire?: OnExpire | undefined;
  /** A pool's name or id: take a warm machine from it. */
  pool?: string | undefined;
  /** The display's size (CONTRACT 16). */
  screen?: ScreenSize | undefined;
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
}

/** @throws AppError 400 for a blank or multi-line name, an unknown size or an expiry not in the future. */
export function checkMachineFields(provider: MachineProvider, input: NewMachine, now: number): MachineFields {
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
  return { name, size: input.size, externalId: input.externalId ?? '', labels: input.labels ?? {}, expiresAt, onExpire: input.onExpire ?? 'stop', screen: input.screen ?? null };
}
