import { requireBalance } from '../billing/enforcement.ts';
import { DEFAULT_IMAGE_NAME, type MachinesConfig } from '../config.ts';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { generateToken, hashToken } from '../shared/secrets.ts';
import { BOOT_CALL_GRACE_MS, bootStarting, stopOrDestroy } from './machine-actions.ts';
import { changedMeanwhile, hostFailed, hostNotAnswering, machineExpired, machineNotFound, unknownSize, wrongStatus } from './machines.errors.ts';
import {
  findMachine,
  insertMachine,
  listMachineRows,
  toMachineView,
  updateMachineIf,
  updateMachineSettings,
  type MachineRow,
  type MachineView,
} from './machines.repository.ts';
import type { MachinesTable, MachineStatus } from './machines.tables.ts';
import type { Updateable } from 'kysely';
import { scheduleIdleCheck } from './activity.ts';
import { checkAutoStopMinutes, checkMachineFields, type MachineWithToken, type NewMachine } from './machine-fields.ts';
import { markStarting, scheduleCheck, scheduleExpiry } from './machine-transitions.ts';
import { claimFromPool } from './pools.service.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { envFromTemplate, templateByRef } from './template-source.ts';
import { placeMachine } from '../hosts/hosts.service.ts';
import { findHost } from '../hosts/hosts.repository.ts';

/**
 * Creates and boots a machine, or claims a warm one from a pool.
 * `machine.created` follows when the boot completes (its check asks the
 * provider). The machine is recorded before the host is asked, so a host that
 * refuses the boot leaves it in `error` with `machine.error`, answered as such.
 * With `template`, it starts from the template's disk (its files, image and environment).
 * @throws AppError 400 bad fields, 402 payment_required on an empty balance, 404 unknown pool or template, 409 pool_empty.
 */
export async function createMachine(deps: Deps, provider: MachineProvider, accountId: string, input: NewMachine): Promise<MachineWithToken> {
  const now = deps.clock.now();
  const fields = checkMachineFields(provider, input, now, imageNames(deps.config.machines), deps.config.machines.autoStopMinutes, deps.config.machines.egress);
  if (input.pool !== undefined) return claimFromPool(deps, provider, accountId, input.pool, fields);
  const template = input.template === undefined ? null : await templateByRef(deps, accountId, input.template);
  await requireBalance(deps, accountId);
  const env = template === null ? ownEnv(deps, fields.env) : envFromTemplate(deps, template, fields.env);
  const mcpToken = generateToken('tmm_');
  const unplaced: Omit<MachineRow, 'host'> = {
    id: newId('mch', now),
    account_id: accountId,
    lost_with_host: 0,
    name: fields.name,
    size: fields.size ?? provider.defaultSize,
    external_id: fields.externalId,
    labels: JSON.stringify(fields.labels),
    status: 'starting',
    status_changed_at: now,
    version: 0,
    booted_at: null,
    pool_id: null,
    on_expire: fields.onExpire,
    expires_at: fields.expiresAt,
    expired_at: null,
    mcp_token_hash: hashToken(mcpToken),
    pending_action: null,
    pending_reason: null,
    screen_width: fields.screen?.width ?? null,
    screen_height: fields.screen?.height ?? null,
    ...env,
    image: template?.image ?? fields.image,
    template_id: template?.id ?? null,
    auto_stop_minutes: fields.autoStopMinutes,
    last_active_at: null,
    network: fields.network === null ? null : JSON.stringify(fields.network),
    created_at: now,
    updated_at: now,
  };
  const row: MachineRow = await inTransaction(deps.database, async (tx) => {
    // A template's machine goes where its disk is when that host has room; elsewhere the disk is copied there first.
    const placed = { ...unplaced, host: await placeMachine(deps, provider, tx.db, unplaced.size, { prefer: template?.host }) };
    await insertMachine(tx.db, placed);
    // Asked of the provider only if the boot call's own answer is never recorded (the process died in between).
    await scheduleCheck(deps, tx, placed.id, now + BOOT_CALL_GRACE_MS);
    await scheduleExpiry(deps, tx, placed);
    return placed;
  });
  const { machine } = await bootStarting(deps, provider, row);
  return { ...toMachineView(machine), mcpToken };
}

/** A machine's own environment as its columns hold it: the names in clear, the whole sealed. */
function ownEnv(deps: Pick<Deps, 'secrets'>, env: Record<string, string>): { env_names: string; env_sealed: string | null } {
  return { env_names: JSON.stringify(Object.keys(env)), env_sealed: Object.keys(env).length === 0 ? null : deps.secrets.seal(JSON.stringify(env)) };
}

/** The images users may pick, the base one (`default`) first. */
export function imageNames(config: Pick<MachinesConfig, 'images'>): string[] {
  return [DEFAULT_IMAGE_NAME, ...Object.keys(config.images)];
}

/** @throws AppError 404 when the machine does not exist or belongs to another account. */
export async function getMachineRow(deps: Pick<Deps, 'db'>, accountId: string, id: string): Promise<MachineRow> {
  const row = await findMachine(deps.db, accountId, id);
  if (row === undefined) throw machineNotFound();
  return row;
}

export async function listMachines(
  deps: Deps,
  accountId: string,
  options: { limit: number; cursor: string | undefined; status: MachineStatus | undefined },
): Promise<MachineView[]> {
  const rows = await listMachineRows(deps.db, accountId, { limit: options.limit, before: options.cursor, status: options.status });
  return rows.map(toMachineView);
}

/**
 * Boots a stopped (or failed) machine; `machine.started` follows when the boot completes.
 * @throws AppError 404, 402 payment_required on an empty balance, 409 invalid_state when it is not stopped or error, has expired, or its host is lost; 502 provider_error when the host refuses (the machine is then in error).
 */
export async function startMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<MachineView> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status !== 'stopped' && row.status !== 'error') throw wrongStatus('be started', row.status);
  if (row.expired_at !== null) throw machineExpired();
  // Its disk is on that host: a boot there would wait, starting, for as long as the host is lost.
  if (row.host !== null && (await findHost(deps.db, row.host))?.state === 'lost') throw hostNotAnswering();
  await requireBalance(deps, accountId);
  const starting = await inTransaction(deps.database, (tx) => markStarting(deps, tx, row, deps.clock.now() + BOOT_CALL_GRACE_MS));
  if (starting === null) throw changedMeanwhile();
  const { machine, ok } = await bootStarting(deps, provider, starting);
  if (!ok) throw hostFailed('boot');
  return toMachineView(machine);
}

/**
 * Turns a machine off, keeping its state (`machine.stopped`, reason `requested`).
 * @throws AppError 404, 409 invalid_state unless it is starting, running or paused; 502 provider_error when the host fails (the machine is then in error).
 */
export async function stopMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<MachineView> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status !== 'running' && row.status !== 'starting' && row.status !== 'paused') throw wrongStatus('be stopped', row.status);
  const outcome = await stopOrDestroy(deps, provider, row, { action: 'stop', reason: 'requested' });
  if (outcome === null) throw changedMeanwhile();
  if (!outcome.ok) throw hostFailed('stop');
  return toMachineView(outcome.machine);
}

/**
 * Deletes a machine (`machine.destroyed`); its record stays readable with status `destroyed`.
 * @throws AppError 404, 409 invalid_state when it is destroyed or a stop is under way; 502 provider_error when the host fails (the machine is then in error).
 */
export async function destroyMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<MachineView> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status === 'destroyed' || row.status === 'stopping') throw wrongStatus('be destroyed', row.status);
  const outcome = await stopOrDestroy(deps, provider, row, { action: 'destroy', reason: 'requested' });
  if (outcome === null) throw changedMeanwhile();
  if (!outcome.ok) throw hostFailed('destroy');
  return toMachineView(outcome.machine);
}

/** What PATCH /api/machines/{id} may change; what is left out stays. */
export interface MachineChanges {
  autoStopMinutes?: number | undefined;
}

/**
 * Changes a machine's settings (PATCH): each given field is checked first, so
 * a bad one changes nothing. A new `autoStopMinutes` moves the machine's idle
 * check in the same transaction (0 cancels it).
 * @throws AppError 400 bad value, 404 unknown machine, 409 invalid_state for a destroyed one, 409 conflict when it changed meanwhile.
 */
export async function updateMachine(deps: Deps, accountId: string, id: string, input: MachineChanges): Promise<MachineView> {
  const changes: Updateable<MachinesTable> = {};
  if (input.autoStopMinutes !== undefined) changes.auto_stop_minutes = checkAutoStopMinutes(input.autoStopMinutes);
  if (Object.keys(changes).length === 0) throw invalidRequest('Give at least one field to change: autoStopMinutes or network.');
  const row = await getMachineRow(deps, accountId, id);
  if (row.status === 'destroyed') throw wrongStatus('be changed', row.status);
  const updated = await inTransaction(deps.database, async (tx) => {
    const changed = await updateMachineSettings(tx.db, row, changes, deps.clock.now());
    if (changed !== null && changes.auto_stop_minutes !== undefined) await scheduleIdleCheck(deps, tx, changed);
    return changed;
  });
  if (updated === null) throw changedMeanwhile();
  return toMachineView(updated);
}

/**
 * Issues a new machine token; the previous one fails at once.
 * @throws AppError 404, 409 invalid_state for a destroyed machine.
 */
export async function rotateMachineToken(deps: Deps, accountId: string, id: string): Promise<MachineWithToken> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status === 'destroyed') throw wrongStatus('get a token', row.status);
  const mcpToken = generateToken('tmm_');
  if (!(await updateMachineIf(deps.db, row, { mcp_token_hash: hashToken(mcpToken) }, deps.clock.now()))) throw changedMeanwhile();
  return { ...toMachineView(row), mcpToken };
}
