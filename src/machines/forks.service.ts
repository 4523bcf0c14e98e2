import { requireBalance } from '../billing/enforcement.ts';
import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { generateToken, hashToken } from '../shared/secrets.ts';
import { BOOT_CALL_GRACE_MS, bootStarting } from './machine-actions.ts';
import type { MachineWithToken } from './machine-fields.ts';
import { scheduleCheck } from './machine-transitions.ts';
import { hostFailedToCopy } from './machines.errors.ts';
import { insertMachine, toMachineView, toProviderMachine, type MachineRow } from './machines.repository.ts';
import { MACHINE_LIMITS } from './machines.schemas.ts';
import { getMachineRow } from './machines.service.ts';
import { checkName } from './names.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { requireCopyable, templatesOf } from './templates.service.ts';
import { placeMachine } from '../hosts/hosts.service.ts';

/** Machines one fork makes. */
export const FORK_LIMITS = { min: 1, max: 10 } as const;

/** `name` for one copy, `name-1`…`name-N` for several; the source's name and `-fork` when none is given. Cut to fit the name's limit. */
export function forkNames(base: string, count: number): string[] {
  if (count === 1) return [base.slice(0, MACHINE_LIMITS.name)];
  return Array.from({ length: count }, (_, i) => `${base.slice(0, MACHINE_LIMITS.name - String(count).length - 1)}-${i + 1}`);
}

/**
 * Makes `count` new machines from a machine's disk at once: the host copies it
 * once (a running machine is frozen for the copy and goes on after) into every
 * copy, then the copies are recorded and boot like created machines
 * (`machine.created` each). A copy takes the source's size, labels, screen,
 * image and environment; not its name, expiry, external id or pool. A fork
 * the host fails records nothing.
 * @throws AppError 400 count outside 1–10 or a blank name, 404, 402 payment_required, 409 invalid_state (booting, stopping, destroyed), 409 not_supported, 502 provider_error.
 */
export async function forkMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string, input: { count: number; name?: string | undefined }): Promise<MachineWithToken[]> {
  const { count } = input;
  if (!Number.isInteger(count) || count < FORK_LIMITS.min || count > FORK_LIMITS.max) throw invalidRequest(`count must be an integer from ${FORK_LIMITS.min} to ${FORK_LIMITS.max}.`);
  const base = input.name === undefined ? undefined : checkName(input.name);
  const source = await getMachineRow(deps, accountId, id);
  requireCopyable(source, 'be forked');
  const templates = templatesOf(provider);
  await requireBalance(deps, accountId);
  const now = deps.clock.now();
  const names = forkNames(base ?? `${source.name}-fork`, count);
  const copies = names.map((name) => {
    const mcpToken = generateToken('tmm_');
    const row: MachineRow = {
      // Whatever else a machine carries (columns added since) is the source's, as a copy of it should be.
      ...source,
      id: newId('mch', now),
      name,
      external_id: '',
      status: 'starting',
      status_changed_at: now,
      version: 0,
      booted_at: null,
      pool_id: null,
      on_expire: 'stop',
      expires_at: null,
      expired_at: null,
      mcp_token_hash: hashToken(mcpToken),
      pending_action: null,
      pending_reason: null,
      // Its disk is the source's as it was now, not its template's.
      template_id: null,
      // Its own idle time starts at its own start (its network policy and idle stop are the source's).
      last_active_at: null,
      created_at: now,
      updated_at: now,
    };
    return { row, mcpToken };
  });
  try {
    await templates.fork(toProviderMachine(source), copies.map(({ row }) => toProviderMachine(row)));
  } catch (err) {
    deps.logger.error({ err, machineId: source.id }, 'the host failed to fork a machine');
    throw hostFailedToCopy('fork the machine');
  }
  try {
    await inTransaction(deps.database, async (tx) => {
      for (const { row } of copies) {
        // On the source's host, where its disk was copied: refused when the copies would fill it past its capacity.
        await placeMachine(deps, provider, tx.db, row.size, { only: source.host });
        await insertMachine(tx.db, row);
        await scheduleCheck(deps, tx, row.id, now + BOOT_CALL_GRACE_MS);
      }
    });
  } catch (error) {
    // Nothing of a refused fork stays: its copies were never recorded, so their containers go.
    await Promise.allSettled(copies.map(({ row }) => provider.destroy(toProviderMachine(row))));
    throw error;
  }
  const answers: MachineWithToken[] = [];
  for (const { row, mcpToken } of copies) {
    const { machine } = await bootStarting(deps, provider, row);
    answers.push({ ...toMachineView(machine), mcpToken });
  }
  return answers;
}
