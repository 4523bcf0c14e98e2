import type { Deps } from '../deps.ts';
import { toIso } from '../shared/clock.ts';
import { toProviderMachine } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { MachineProvider, MetricSample } from '../providers/provider.ts';

/** One sample every 5 s, the last hour's kept. */
export const SAMPLE_EVERY_MS = 5000;

export interface MetricSampleView extends Omit<MetricSample, 'at'> {
  at: string;
}

/**
 * The samples a machine kept of its use of resources, taken after `since`,
 * oldest first. They live in the machine (its agent's memory), not in the
 * database: a machine that is not running has none to give, and one started
 * again begins a new hour. The simulated provider keeps none.
 * @throws AppError 404 for a machine that is not the account's.
 */
export async function machineMetrics(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, since: string | undefined): Promise<MetricSampleView[]> {
  const row = await getMachineRow(deps, accountId, machineId);
  if (row.status !== 'running' || provider.metrics === undefined) return [];
  const samples = await provider.metrics(toProviderMachine(row), since === undefined ? 0 : Date.parse(since));
  return samples.map((sample) => ({ ...sample, at: toIso(sample.at) }));
}
