import type { IncomingHttpHeaders } from 'node:http';
import { ConfigError } from '../../config.ts';
import type { Deps } from '../../deps.ts';
import { toIso } from '../../shared/clock.ts';
import { AppError } from '../../http/errors.ts';
import { wrongStatus, invalidState } from '../../machines/machines.errors.ts';
import { findMachineById, type MachineRow } from '../../machines/machines.repository.ts';
import { getMachineRow } from '../../machines/machines.service.ts';
import type { MachineActivity } from '../../machines/activity.ts';
import {
  checkSignedValue,
  cookieValue,
  isMachineId,
  isPreviewToken,
  LINK_PARAMETER,
  portOf,
  PREVIEW_COOKIE,
  previewHosts,
  previewToken,
  signedValue,
  type PreviewHosts,
} from './preview-access.ts';
import { invalidPort, invalidPreviewHost, invalidPreviewLink, machineNotRunning, previewMachineNotFound, previewPrivate } from './previews.errors.ts';
import { isPublicPort, makePortPrivate, makePortPublic, previewSigningKey, publicPortsOf } from './previews.repository.ts';

/** What previews need: the service's dependencies, PREVIEW_URL's hosts, and the key their credentials are signed with. */
export interface Previews {
  deps: Deps;
  hosts: PreviewHosts;
  key: () => Promise<Buffer>;
  /** True when PREVIEW_URL is https: the cookie is `Secure`. */
  secure: boolean;
  /** A preview's requests and traffic keep its machine awake (activity.ts). */
  activity: MachineActivity;
}

/** @throws ConfigError when PUBLIC_URL's host has the shape of a preview host: the dashboard would be answered as a preview. */
export function createPreviews(deps: Deps, activity: MachineActivity): Previews {
  const hosts = previewHosts(deps.config.previewUrl);
  if (hosts.parse(new URL(deps.config.publicUrl).hostname) !== null) {
    throw new ConfigError(`PREVIEW_URL must not match PUBLIC_URL's host ${new URL(deps.config.publicUrl).hostname} (got ${JSON.stringify(deps.config.previewUrl)})`);
  }
  return {
    deps,
    hosts,
    key: previewSigningKey(deps.db, () => deps.clock.now()),
    secure: deps.config.previewUrl.startsWith('https:'),
    activity,
  };
}

export const PREVIEW_LINK_SECONDS = { min: 60, max: 86_400, default: 3_600 } as const;

export interface PreviewSettings {
  /** The machine's preview token (X-Preview-Token); null for a machine without a machine token (waiting in a pool). */
  previewToken: string | null;
  /** The preview URL of a port: `{port}` stays to be replaced. */
  urlTemplate: string;
  publicPorts: Array<{ port: number; url: string }>;
}

export interface PreviewLink {
  url: string;
  expiresAt: string;
}

/** @throws AppError 404 for an unknown machine or one of another account. */
export async function previewSettings(previews: Previews, accountId: string, machineId: string): Promise<PreviewSettings> {
  const machine = await previewableMachine(previews, accountId, machineId);
  const key = await previews.key();
  const ports = await publicPortsOf(previews.deps.db, machine.id);
  return {
    previewToken: machine.mcp_token_hash === null ? null : previewToken(key, machine.id, machine.mcp_token_hash),
    urlTemplate: previews.hosts.originOf(machine.id, 0).replace(/^(https?:\/\/)0/, '$1{port}'),
    publicPorts: ports.map((port) => ({ port, url: previews.hosts.originOf(machine.id, port) })),
  };
}

/**
 * A link that opens the port's preview until it expires: it leaves a cookie
 * on that preview host only. A new machine token voids it.
 * @throws AppError 404 unknown machine, 409 for a machine without a machine token.
 */
export async function createPreviewLink(previews: Previews, accountId: string, machineId: string, input: { port: number; expiresInSeconds?: number | undefined }): Promise<PreviewLink> {
  const machine = await previewableMachine(previews, accountId, machineId);
  if (machine.mcp_token_hash === null) throw invalidState('The machine has no machine token yet (it waits in a pool): claim it first.');
  const expiresAt = Math.floor(previews.deps.clock.now() / 1000) + (input.expiresInSeconds ?? PREVIEW_LINK_SECONDS.default);
  const value = signedValue(await previews.key(), 'link', machine.id, input.port, machine.mcp_token_hash, expiresAt);
  return { url: `${previews.hosts.originOf(machine.id, input.port)}/?${LINK_PARAMETER}=${value}`, expiresAt: toIso(expiresAt * 1000) };
}

/** @throws AppError 404 for an unknown machine. */
export async function setPortPublic(previews: Previews, accountId: string, machineId: string, port: number, makePublic: boolean): Promise<{ port: number; public: boolean; url: string }> {
  const machine = await previewableMachine(previews, accountId, machineId);
  if (makePublic) await makePortPublic(previews.deps.db, machine.id, port, previews.deps.clock.now());
  else await makePortPrivate(previews.deps.db, machine.id, port);
  return { port, public: makePublic, url: previews.hosts.originOf(machine.id, port) };
}

async function previewableMachine(previews: Previews, accountId: string, machineId: string): Promise<MachineRow> {
  const machine = await getMachineRow(previews.deps, accountId, machineId);
  if (machine.status === 'destroyed') throw wrongStatus('serve previews', machine.status);
  return machine;
}

/** What a request to a preview host gets, checked in this order: 400, 404, 401, then the machine. */
export type PreviewDecision =
  | { kind: 'refused'; error: AppError }
  | { kind: 'signed-in'; location: string; cookie: string }
  | { kind: 'serve'; machine: MachineRow; port: number };

/** The request as the decision reads it. */
export interface PreviewRequest {
  hostname: string;
  url: string;
  method: string;
  headers: IncomingHttpHeaders;
}

export async function decidePreview(previews: Previews, request: PreviewRequest): Promise<PreviewDecision> {
  const refused = (error: AppError): PreviewDecision => ({ kind: 'refused', error });
  const address = previews.hosts.parse(request.hostname);
  if (address === null) return refused(invalidPreviewHost('This host names no preview.'));
  const port = portOf(address.port);
  if (port === null) return refused(invalidPort());
  if (!isMachineId(address.machineId)) return refused(invalidPreviewHost('The host names no machine: a preview host is <port>-mch-<26 characters>.'));
  const machine = await findMachineById(previews.deps.db, address.machineId);
  if (machine === undefined || machine.status === 'destroyed') return refused(previewMachineNotFound());

  const key = await previews.key();
  const tokenHash = machine.mcp_token_hash;
  const nowSeconds = Math.floor(previews.deps.clock.now() / 1000);
  const query = request.url.indexOf('?');
  const params = new URLSearchParams(query === -1 ? '' : request.url.slice(query + 1));
  const link = params.get(LINK_PARAMETER);
  if (link !== null) {
    const checked = tokenHash === null ? null : checkSignedValue(key, 'link', machine.id, port, tokenHash, link, nowSeconds);
    if (checked === null || !checked.valid || request.method !== 'GET') return refused(invalidPreviewLink());
    params.delete(LINK_PARAMETER);
    const rest = params.toString();
    const path = query === -1 ? request.url : request.url.slice(0, query);
    const cookie = [
      `${PREVIEW_COOKIE}=${signedValue(key, 'cookie', machine.id, port, tokenHash!, checked.expiresAt)}`,
      'Path=/',
      `Max-Age=${checked.expiresAt - nowSeconds}`,
      'HttpOnly',
      'SameSite=Lax',
      ...(previews.secure ? ['Secure'] : []),
    ].join('; ');
    return { kind: 'signed-in', location: rest === '' ? path : `${path}?${rest}`, cookie };
  }

  if (!(await mayOpen(previews, key, machine, port, request.headers, nowSeconds))) return refused(previewPrivate());
  if (machine.status !== 'running') return refused(machineNotRunning(machine.status));
  return { kind: 'serve', machine, port };
}

async function mayOpen(previews: Previews, key: Buffer, machine: MachineRow, port: number, headers: IncomingHttpHeaders, nowSeconds: number): Promise<boolean> {
  const tokenHash = machine.mcp_token_hash;
  const token = headers['x-preview-token'];
  if (tokenHash !== null && typeof token === 'string' && isPreviewToken(key, machine.id, tokenHash, token)) return true;
  const cookie = cookieValue(headers.cookie, PREVIEW_COOKIE);
  if (tokenHash !== null && cookie !== null && checkSignedValue(key, 'cookie', machine.id, port, tokenHash, cookie, nowSeconds).valid) return true;
  return isPublicPort(previews.deps.db, machine.id, port);
}

/** A machine's preview, to be found by id alone: for MCP tools that answer a port's URL. */
export async function previewOf(previews: Previews, machineId: string, port: number): Promise<{ url: string; public: boolean }> {
  const machine = await findMachineById(previews.deps.db, machineId);
  return { url: previews.hosts.originOf(machineId, port), public: machine === undefined ? false : await isPublicPort(previews.deps.db, machine.id, port) };
}
