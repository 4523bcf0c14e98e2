import type { Tx } from '../db/transaction.ts';
import type { EventType } from '../events/event-types.ts';
import { emitEvent } from '../event-webhooks/outbox.ts';
import type { Deps } from '../deps.ts';
import { parseLabels, type MachineRow } from './machines.repository.ts';

/** The machine summary inside `machine.*` events. */
export function machineSummary(row: MachineRow) {
  return { id: row.id, name: row.name, status: row.status, size: row.size, externalId: row.external_id, labels: parseLabels(row.labels) };
}

/** In `run.*` events the machine carries only these four fields. */
export function runMachineSummary(row: MachineRow) {
  return { id: row.id, name: row.name, externalId: row.external_id, labels: parseLabels(row.labels) };
}

/** `data` holds `machine` (as it is now) and `detail`. */
export async function emitMachineEvent(
  deps: Deps,
  tx: Tx,
  type: Extract<EventType, `machine.${string}`>,
  row: MachineRow,
  detail: Record<string, unknown> = {},
): Promise<void> {
  await emitEvent(deps, tx, { accountId: row.account_id, type, data: { machine: machineSummary(row), detail } });
}
