import { AppError } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { changedMeanwhile, wrongStatus } from './machines.errors.ts';
import { toMachineView, toProviderMachine, updateMachineIf, type MachineView } from './machines.repository.ts';
import { getMachineRow } from './machines.service.ts';
import { checkNetworkPolicy } from './network-policy.ts';
import type { MachineProvider } from './provider.ts';

/** Statuses in which a machine's host may hold rules for it: a change is applied there at once. */
const LIVE = new Set(['starting', 'running', 'paused']);

/**
 * Sets a machine's network policy (CONTRACT 20): saved, then applied to the
 * machine where it runs, without a restart (the provider's `setNetwork`); a
 * stopped machine gets it at its next start. The host failing to apply it
 * puts the previous policy back: the answer then says nothing changed.
 * @throws AppError 400 for a bad entry (nothing saved), 404, 409 invalid_state for a destroyed machine or a change that raced this one, 502 provider_error when the host could not apply it.
 */
export async function setMachineNetwork(deps: Deps, provider: MachineProvider, accountId: string, id: string, input: { internet: boolean; allow?: string[] | undefined; deny?: string[] | undefined }): Promise<MachineView> {
  const network = checkNetworkPolicy(input, deps.config.machines.egress);
  const row = await getMachineRow(deps, accountId, id);
  if (row.status === 'destroyed') throw wrongStatus('change its network policy', row.status);
  const now = deps.clock.now();
  const json = JSON.stringify(network);
  if (!(await updateMachineIf(deps.db, row, { network: json }, now))) throw changedMeanwhile();
  const updated = { ...row, network: json, version: row.version + 1, updated_at: now };
  if (LIVE.has(row.status) && provider.setNetwork) {
    try {
      await provider.setNetwork(toProviderMachine(updated));
    } catch (err) {
      deps.logger.error({ err, machineId: row.id }, 'the host failed to apply a network policy');
      await updateMachineIf(deps.db, updated, { network: row.network }, deps.clock.now());
      throw new AppError(502, 'provider_error', 'The host failed to apply the network policy; the previous one still holds. Try again.');
    }
  }
  return toMachineView(updated);
}
