import { isUniqueViolation } from '../db/errors.ts';
import { inTransaction } from '../db/transaction.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { findMachineById } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { checkName } from '../machines/names.ts';
import type { MachineProvider } from '../providers/provider.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { generateOpaqueToken, generateSigningSecret, hashToken } from '../shared/secrets.ts';
import {
  deleteInboundWebhookRow,
  findInboundWebhook,
  findInboundWebhookByTokenHash,
  findReceipt,
  insertInboundWebhook,
  insertReceipt,
  listInboundWebhookRows,
  recordInboundWebhookUse,
  toInboundWebhookView,
  type InboundWebhookRow,
  type InboundWebhookView,
} from './inbound-webhooks.repository.ts';
import { inboundWebhookNotFound, invalidSignature, replayed } from './runs.errors.ts';
import { toRunView, type RunView } from './runs.repository.ts';
import { queueRun } from './runs.service.ts';
import { SIGNATURE_TOLERANCE_SECONDS, verifyInboundSignature } from './signature.ts';

/** Where inbound webhooks are received: the token in the path is the webhook's unguessable address. */
export const INBOUND_WEBHOOK_PATH = '/api/hooks';

/** The last moment a request signed at `t` (unix seconds) passes the timestamp check: until the end of second t + tolerance. */
function replayableUntil(t: number): number {
  return (t + SIGNATURE_TOLERANCE_SECONDS + 1) * 1000;
}

/** The create answer: the URL and the signing secret are shown only here. */
export interface CreatedInboundWebhook extends InboundWebhookView {
  url: string;
  secret: string;
}

/** @throws AppError 400 blank or multi-line name, 404 unknown machine, 409 invalid_state for a destroyed machine. */
export async function createInboundWebhook(
  deps: Deps,
  accountId: string,
  input: { machineId: string; name: string; command: string; stopAfter?: boolean | undefined },
): Promise<CreatedInboundWebhook> {
  const name = checkName(input.name);
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

/** Its URL stops working at once. @throws AppError 404 for an unknown inbound webhook or another account's. */
export async function deleteInboundWebhook(deps: Deps, accountId: string, id: string): Promise<void> {
  if (!(await deleteInboundWebhookRow(deps.db, accountId, id))) throw inboundWebhookNotFound();
}

/**
 * A signed POST to the webhook's URL queues a run (booting the machine when
 * it is stopped) and answers it at once, pending: the outcome follows as
 * `run.succeeded` / `run.failed`. Each signed request starts one run: the
 * same signature again within the timestamp tolerance is a replay.
 * @throws AppError 404 unknown URL, 401 invalid_signature, 409 replayed.
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
  const now = deps.clock.now();
  const check = verifyInboundSignature(hook.secret, signature, body, now);
  if (!check.ok) throw invalidSignature(check.problem);
  const seen = await findReceipt(deps.db, hook.id, check.signature);
  if (seen !== undefined) throw replayed(seen.run_id);
  const runId = newId('run', now);
  try {
    const run = await inTransaction(deps.database, async (tx) => {
      // First, so that of two identical requests arriving together the second fails here, before it boots anything.
      await insertReceipt(tx.db, { hook_id: hook.id, signature: check.signature, run_id: runId, expires_at: replayableUntil(check.timestamp) });
      await recordInboundWebhookUse(tx.db, hook.id, now);
      const machine = (await findMachineById(tx.db, hook.machine_id))!;
      return queueRun(deps, provider, tx, machine, {
        id: runId,
        source: 'webhook',
        sourceId: hook.id,
        sourceName: hook.name,
        command: hook.command,
        stopAfter: hook.stop_after === 1,
      });
    });
    return toRunView(run);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    throw replayed((await findReceipt(deps.db, hook.id, check.signature))?.run_id ?? null);
  }
}
