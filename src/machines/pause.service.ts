import { requireBalance } from '../billing/enforcement.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { SECOND } from '../shared/clock.ts';
import { changedMeanwhile, hostFailedToFreeze, invalidState, notSupported, wrongStatus } from './machines.errors.ts';
import { findMachineById, toMachineView, toProviderMachine, type MachineRow, type MachineView } from './machines.repository.ts';
import { getMachineRow } from './machines.service.ts';
import { markPaused, markResumed } from './machine-transitions.ts';
import type { MachineProvider } from '../providers/provider.ts';

/**
 * Pause and resume. Unlike a stop, the host is asked first and
 * the change recorded after: a pause the host refused changes nothing (the
 * machine still runs, and is billed as running), and both calls are
 * idempotent, so a request that loses its compare-and-set to another change
 * (a stop, a destroy) leaves the host in a state the winner's call copes with
 * (a stop or destroy of a paused container works). The machine's check sees
 * the engine's own word (an operator's `docker pause`) and records it too.
 */

/** How soon a paused machine's check asks the host whether it is still there (and still paused). */
const PAUSED_CHECK_MS = 60 * SECOND;

function capabilityOf(provider: MachineProvider) {
  const { pause, resume } = provider;
  if (pause === undefined || resume === undefined) throw notSupported('pause', provider.name);
  return { pause: pause.bind(provider), resume: resume.bind(provider) };
}

/**
 * Freezes a running machine with its memory and processes: `machine.paused`;
 * from then on it is metered at the paused price, and its tools answer 409.
 * @throws AppError 404, 409 invalid_state unless it is running (and claimed, when pooled), 409 not_supported where the provider cannot pause, 502 provider_error when the host fails (nothing changed).
 */
export async function pauseMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<MachineView> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status !== 'running') throw wrongStatus('be paused', row.status);
  // A warm pool keeps its machines running for whoever claims one: a paused one would be neither ready nor gone.
  if (row.pool_id !== null) throw invalidState('The machine waits in a warm pool; claim it (POST /api/machines with pool) before pausing it.');
  const { pause } = capabilityOf(provider);
  try {
    await pause(toProviderMachine(row));
  } catch (err) {
    deps.logger.error({ err, machineId: row.id }, 'the host failed to pause a machine');
    throw hostFailedToFreeze('pause', row.status);
  }
  const paused = await inTransaction(deps.database, (tx) => markPaused(deps, tx, row, deps.clock.now() + PAUSED_CHECK_MS));
  return toMachineView(paused ?? (await afterLostRace(deps, row, 'paused')));
}

/**
 * Lets a paused machine go on from where it was frozen: `machine.resumed`;
 * metered at the running price again.
 * @throws AppError 404, 409 invalid_state unless it is paused, 402 payment_required on an empty balance, 502 provider_error when the host fails (nothing changed).
 */
export async function resumeMachine(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<MachineView> {
  const row = await getMachineRow(deps, accountId, id);
  if (row.status !== 'paused') throw wrongStatus('be resumed', row.status);
  const { resume } = capabilityOf(provider);
  await requireBalance(deps, accountId);
  try {
    await resume(toProviderMachine(row));
  } catch (err) {
    deps.logger.error({ err, machineId: row.id }, 'the host failed to resume a machine');
    throw hostFailedToFreeze('resume', row.status);
  }
  const resumed = await inTransaction(deps.database, (tx) => markResumed(deps, tx, row, deps.clock.now() + PAUSED_CHECK_MS));
  return toMachineView(resumed ?? (await afterLostRace(deps, row, 'running')));
}

/**
 * The compare-and-set lost. Most often to the machine's own check: the engine
 * reports our pause (or resume) as an event, and the check it brings forward
 * may record the host's word first, with its event; the machine is then as
 * asked, and that is the answer. Any other change (a stop, a destroy) stands:
 * a paused container stops and is destroyed as well.
 * @throws AppError 409 invalid_state when the machine is not as asked.
 */
async function afterLostRace(deps: Deps, row: MachineRow, wanted: 'paused' | 'running'): Promise<MachineRow> {
  const fresh = await findMachineById(deps.db, row.id);
  if (fresh?.status === wanted && fresh.status_changed_at >= row.status_changed_at) return fresh;
  throw changedMeanwhile();
}
