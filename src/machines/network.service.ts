import { AppError } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { changedMeanwhile, wrongStatus } from './machines.errors.ts';
import { toMachineView, toProviderMachine, updateMachineIf, type MachineView } from './machines.repository.ts';
import { getMachineRow, updateMachine, type MachineChanges } from './machines.service.ts';
import { checkAutoStopMinutes } from './machine-fields.ts';
import { checkNetworkPolicy } from '../providers/network-policy.ts';
import type { MachineProvider } from '../providers/provider.ts';

/** Statuses in which a machine's host may hold rules for it: a change is applied there at once. */
const LIVE = new Set(['starting', 'running', 'paused']);

/**
 * Sets a machine's network policy: saved, then applied to the
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

/** A network policy as a caller gives it. */
export type NetworkInput = { internet: boolean; allow?: string[] | undefined; deny?: string[] | undefined };

/**
 * PATCH /api/machines/{id} and the `machine_update` tool: every value is
 * checked before anything changes; the network policy goes first, as the one
 * change the host can refuse (then nothing else changes either).
 * @throws AppError 400 for a bad value (nothing changes), and as setMachineNetwork and updateMachine.
 */
export async function changeMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string, input: MachineChanges & { network?: NetworkInput | undefined }): Promise<MachineView> {
  const { network, ...settings } = input;
  if (network !== undefined) checkNetworkPolicy(network, deps.config.machines.egress);
  if (settings.autoStopMinutes !== undefined) checkAutoStopMinutes(settings.autoStopMinutes);
  let machine = network === undefined ? null : await setMachineNetwork(deps, provider, accountId, id, network);
  if (network === undefined || Object.values(settings).some((value) => value !== undefined)) machine = await updateMachine(deps, accountId, id, settings);
  return machine!;
}
