import { isUniqueViolation } from '../db/errors.ts';
import { lockAccount } from '../db/locks.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import {
  hostFailedToCopy,
  notSupported,
  templateInUse,
  templateLimitReached,
  templateNameTaken,
  templateNotFound,
  wrongStatus,
} from './machines.errors.ts';
import { toProviderMachine, type MachineRow } from './machines.repository.ts';
import type { MachineStatus } from './machines.tables.ts';
import { getMachineRow } from './machines.service.ts';
import { checkName } from './names.ts';
import type { MachineProvider, MachineTemplates } from '../providers/provider.ts';
import {
  countTemplates,
  deleteTemplateRow,
  findTemplate,
  findTemplateByRef,
  insertTemplate,
  listTemplateRows,
  poolsUsingTemplate,
  toTemplateView,
  type TemplateRow,
  type TemplateView,
} from './templates.repository.ts';

/** Templates an account may keep. */
export const MAX_TEMPLATES_PER_ACCOUNT = 20;

/** A machine's disk can be copied while it runs (frozen for the copy), is paused, or is stopped; not while it boots or stops. */
export const COPYABLE_STATUSES: readonly MachineStatus[] = ['running', 'paused', 'stopped'];

/** @throws AppError 409 not_supported where the provider keeps no disks. */
export function templatesOf(provider: MachineProvider): MachineTemplates {
  if (provider.templates === undefined) throw notSupported('templates or forks', provider.name);
  return provider.templates;
}

/** @throws AppError 409 invalid_state unless the machine's disk can be copied now. */
export function requireCopyable(row: MachineRow, action: string): void {
  if (!COPYABLE_STATUSES.includes(row.status)) throw wrongStatus(action, row.status);
}

/**
 * Saves a machine's disk as a template of the account. The host copies first
 * (a running machine is frozen for the copy and goes on after), the record is
 * written after: a copy that fails records nothing, and a template over the
 * limit (two saves at once) is removed from the host again.
 * @throws AppError 400 blank name, 404 the machine, 409 invalid_state (booting, stopping, destroyed), 409 conflict (name taken), 409 limit_reached (the 21st), 409 not_supported, 502 provider_error.
 */
export async function createTemplate(deps: Deps, provider: MachineProvider, accountId: string, input: { machineId: string; name: string }): Promise<TemplateView> {
  const name = checkName(input.name);
  const machine = await getMachineRow(deps, accountId, input.machineId);
  requireCopyable(machine, 'be saved as a template');
  const templates = templatesOf(provider);
  // Checked before the copy too, so a refused request costs the host nothing.
  if ((await countTemplates(deps.db, accountId)) >= MAX_TEMPLATES_PER_ACCOUNT) throw templateLimitReached(MAX_TEMPLATES_PER_ACCOUNT);
  if ((await findTemplateByRef(deps.db, accountId, name))?.name === name) throw templateNameTaken(name);
  const now = deps.clock.now();
  const id = newId('tpl', now);
  let sizeBytes: number;
  try {
    ({ sizeBytes } = await templates.save(toProviderMachine(machine), id));
  } catch (err) {
    deps.logger.error({ err, machineId: machine.id }, 'the host failed to save a machine as a template');
    throw hostFailedToCopy('save the machine as a template');
  }
  const row: TemplateRow = {
    id,
    account_id: accountId,
    name,
    source_machine_id: machine.id,
    image: machine.image,
    size_bytes: sizeBytes,
    env_names: machine.env_names,
    env_sealed: machine.env_sealed,
    created_at: now,
  };
  try {
    await inTransaction(deps.database, async (tx) => {
      await lockAccount(tx.db, accountId);
      if ((await countTemplates(tx.db, accountId)) >= MAX_TEMPLATES_PER_ACCOUNT) throw templateLimitReached(MAX_TEMPLATES_PER_ACCOUNT);
      await insertTemplate(tx.db, row);
    });
  } catch (error) {
    await templates.remove(id).catch((err: unknown) => deps.logger.error({ err, templateId: id }, 'a template refused after its copy could not be removed from the host'));
    if (isUniqueViolation(error)) throw templateNameTaken(name);
    throw error;
  }
  return toTemplateView(row);
}

export async function listTemplates(deps: Deps, accountId: string, limit: number, cursor: string | undefined): Promise<TemplateView[]> {
  return (await listTemplateRows(deps.db, accountId, limit, cursor)).map(toTemplateView);
}

/** @throws AppError 404 for an unknown template or another account's. */
export async function getTemplate(deps: Deps, accountId: string, id: string): Promise<TemplateView> {
  const row = await findTemplate(deps.db, accountId, id);
  if (row === undefined) throw templateNotFound();
  return toTemplateView(row);
}

/**
 * Deletes a template and its disk on the host. Machines made from it keep
 * their files. The record goes first, under the account's lock that pool
 * creation takes too (so no pool can name it meanwhile); a disk the host then
 * fails to remove is logged for the operator, the template being gone for
 * its account either way.
 * @throws AppError 404, 409 template_in_use while a warm pool names it.
 */
export async function deleteTemplate(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<void> {
  await inTransaction(deps.database, async (tx) => {
    await lockAccount(tx.db, accountId);
    if ((await findTemplate(tx.db, accountId, id)) === undefined) throw templateNotFound();
    const pools = await poolsUsingTemplate(tx.db, id);
    if (pools.length > 0) throw templateInUse(pools);
    await deleteTemplateRow(tx.db, id);
  });
  try {
    await provider.templates?.remove(id);
  } catch (err) {
    deps.logger.error({ err, templateId: id }, 'the host failed to remove a deleted template’s disk');
  }
}
