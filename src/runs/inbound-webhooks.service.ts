import { inTransaction } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { MachineProvider } from '../machines/provider.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';
import { newId } from '../shared/ids.ts';
import { generateOpaqueToken, generateSigningSecret, hashToken } from '../shared/secrets.ts';
import {
  findInboundWebhook,
  findInboundWebhookByTokenHash,
  insertInboundWebhook,
  listInboundWebhookRows,
  recordInboundWebhookUse,
  type InboundWebhookRow,
} from './inbound-webhooks.repository.ts';
import { inboundWebhookNotFound, invalidSignature } from './runs.errors.ts';
import { findRunById, toRunView, type RunView } from './runs.repository.ts';
import { executeRun, queueRun } from './runs.service.ts';
import { verifySignature } from './signature.ts';

/** Where inbound webhooks are received: the token in the path is the webhook's unguessable address. */
export const INBOUND_WEBHOOK_PATH = '/api/hooks';

export interface InboundWebhookView {
  id: string;
  machineId: string;
  name: string;
  command: string;
  stopAfter: boolean;
  lastTriggeredAt: string | null;
  createdAt: string;
}

/** The create answer: the URL and the signing secret are shown only here. */
export interface CreatedInboundWebhook extends InboundWebhookView {
  url: string;
  secret: string;
}

function toInboundWebhookView(row: InboundWebhookRow): InboundWebhookView {
  return {
    id: row.id,
    machineId: row.machine_id,
    name: row.name,
    command: row.command,
    stopAfter: row.stop_after === 1,
    lastTriggeredAt: toIsoOrNull(row.last_triggered_at),
    createdAt: toIso(row.created_at),
  };
}

/** @throws AppError 400 blank name, 404 unknown machine, 409 invalid_state for a destroyed machine. */
export async function createInboundWebhook(
  deps: Deps,
  accountId: string,
  input: { machineId: string; name: string; command: string; stopAfter?: boolean | undefined },
): Promise<CreatedInboundWebhook> {
  const name = input.name.trim();
  if (name === '') throw invalidRequest('name must not be blank.');
  const machine = await getMachineRow(deps, accountId, input.machineId);
  if (machine.status === 'destroyed') throw wrongStatus('get an inbound webhook', machine.status);
  const now = deps.clock.now();
  const token = generateOpaqueToken();
  const row: InboundWebhookRow = {
    id: newId('ihk', now),
    account_id: accountId,
    machine_id: machine.id,
    name,
    command: input.command,
    stop_after: input.stopAfter ? 1 : 0,
    token_hash: hashToken(token),
    secret: generateSigningSecret(),
    last_triggered_at: null,
    created_at: now,
  };
  await insertInboundWebhook(deps.db, row);
  return { ...toInboundWebhookView(row), url: `${deps.config.publicUrl}${INBOUND_WEBHOOK_PATH}/${token}`, secret: row.secret };
}

/** @throws AppError 404 for an unknown inbound webhook or another account's. */
export async function getInboundWebhook(deps: Deps, accountId: string, id: string): Promise<InboundWebhookView> {
  const row = await findInboundWebhook(deps.db, accountId, id);
  if (row === undefined) throw inboundWebhookNotFound();
  return toInboundWebhookView(row);
}

export async function listInboundWebhooks(
  deps: Deps,
  accountId: string,
  options: { limit: number; cursor: string | undefined; machineId: string | undefined },
): Promise<InboundWebhookView[]> {
  const rows = await listInboundWebhookRows(deps.db, accountId, { limit: options.limit, before: options.cursor, machineId: options.machineId });
  return rows.map(toInboundWebhookView);
}

/**
 * A signed POST to the webhook's URL starts a run (booting the machine when it is stopped).
 * @throws AppError 404 unknown URL, 401 invalid_signature.
 */
export async function receiveInboundWebhook(
  deps: Deps,
  provider: MachineProvider,
  token: string,
  body: Buffer,
  signature: string | undefined,
): Promise<RunView> {
  const hook = await findInboundWebhookByTokenHash(deps.db, hashToken(token));
  if (hook === undefined) throw inboundWebhookNotFound();
  const check = verifySignature(hook.secret, signature, body, deps.clock.now());
  if (!check.ok) throw invalidSignature(check.problem);
  const queued = await inTransaction(deps.db, async (tx) => {
    await recordInboundWebhookUse(tx.db, hook.id, deps.clock.now());
    const machine = (await findMachineById(tx.db, hook.machine_id))!;
    return queueRun(deps, provider, tx, machine, {
      source: 'webhook',
      sourceId: hook.id,
      sourceName: hook.name,
      command: hook.command,
      stopAfter: hook.stop_after === 1,
    });
  });
  if (queued.executeNow) await executeRun(deps, provider, queued.run.id);
  return toRunView((await findRunById(deps.db, queued.run.id))!);
}
