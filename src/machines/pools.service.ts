import { scheduleIdleCheck } from './activity.ts';
import { DEFAULT_IMAGE_NAME } from '../config.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { balanceIsEmpty, requireBalance } from '../billing/enforcement.ts';
import { inTransaction, type Tx } from '../db/transaction.ts';
import { invalidRequest } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { newId } from '../shared/ids.ts';
import { generateToken, hashToken } from '../shared/secrets.ts';
import { finishPending } from './machine-actions.ts';
import { emitMachineEvent } from './machine-events.ts';
import { hostRetryDelay, poolRefillJob } from './job-types.ts';
import { markStopping, scheduleCheck, scheduleExpiry } from './machine-transitions.ts';
import { poolEmpty, poolNameTaken, poolNotFound, templateNotFound, unknownSize } from './machines.errors.ts';
import {
  insertMachine,
  toMachineView,
  toProviderMachine,
  updateMachineIf,
  warmPoolMachines,
  type MachineRow,
} from './machines.repository.ts';
import type { MachineFields, MachineWithToken } from './machine-fields.ts';
import { checkName } from './names.ts';
import {
  deletePoolRow,
  findPool,
  findPoolByRef,
  insertPool,
  listPoolRows,
  lockPool,
  readyCounts,
  toPoolView,
  updatePoolCount,
  type PoolRow,
  type PoolView,
} from './pools.repository.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { placeMachine } from '../hosts/hosts.service.ts';
import { envFromTemplate, templateByRef } from './template-source.ts';
import { findTemplate, type TemplateRow } from './templates.repository.ts';
import { lockAccount } from '../db/locks.ts';

/** More than any pool holds, so every warm machine is seen. */
const MAX_POOL_MACHINES = 1000;
const CLAIM_ATTEMPTS = 3;

async function poolView(deps: Deps, row: PoolRow): Promise<PoolView> {
  return toPoolView(row, (await readyCounts(deps.db, [row.id])).get(row.id) ?? 0);
}

/** @throws AppError 404 for an unknown pool or another account's. */
export async function getPoolRow(deps: Deps, accountId: string, id: string): Promise<PoolRow> {
  const row = await findPool(deps.db, accountId, id);
  if (row === undefined) throw poolNotFound();
  return row;
}

/** @throws AppError 404 for an unknown pool or another account's. */
export async function getPool(deps: Deps, accountId: string, id: string): Promise<PoolView> {
  return poolView(deps, await getPoolRow(deps, accountId, id));
}

export async function listPools(deps: Deps, accountId: string, limit: number, cursor: string | undefined): Promise<PoolView[]> {
  const rows = await listPoolRows(deps.db, accountId, limit, cursor);
  const ready = await readyCounts(deps.db, rows.map((row) => row.id));
  return rows.map((row) => toPoolView(row, ready.get(row.id) ?? 0));
}

/**
 * Creates a pool and starts booting its `count` machines (from `template`
 * when given: its files, image and environment).
 * @throws AppError 400 blank name or unknown size, 404 unknown template, 409 conflict when the name is taken.
 */
export async function createPool(
  deps: Deps,
  provider: MachineProvider,
  accountId: string,
  input: { name: string; size: string; count: number; template?: string | undefined },
): Promise<PoolView> {
  const name = checkName(input.name);
  if (!provider.sizes.includes(input.size)) throw unknownSize(provider.sizes);
  const template = input.template === undefined ? null : await templateByRef(deps, accountId, input.template);
  const now = deps.clock.now();
  const row: PoolRow = {
    id: newId('pool', now),
    account_id: accountId,
    name,
    size: input.size,
    count: input.count,
    template_id: template?.id ?? null,
    version: 0,
    created_at: now,
    updated_at: now,
  };
  try {
    await inTransaction(deps.database, async (tx) => {
      if (template !== null) {
        // Under the lock a template's deletion takes: it either sees this pool, or is gone before it is named.
        await lockAccount(tx.db, accountId);
        if ((await findTemplate(tx.db, accountId, template.id)) === undefined) throw templateNotFound();
      }
      await insertPool(tx.db, row);
      await refillOrRetry(deps, provider, tx, row.id);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw poolNameTaken(name);
    throw error;
  }
  return poolView(deps, row);
}

/**
 * Changes how many machines the pool keeps warm: boots more, or destroys the surplus.
 * @throws AppError 404 for an unknown pool or another account's.
 */
export async function resizePool(deps: Deps, provider: MachineProvider, accountId: string, id: string, count: number): Promise<PoolView> {
  const pool = await getPoolRow(deps, accountId, id);
  const surplus = await inTransaction(deps.database, async (tx) => {
    await updatePoolCount(tx.db, pool.id, count, deps.clock.now());
    return refillOrRetry(deps, provider, tx, pool.id);
  });
  await destroyMarked(deps, provider, surplus);
  return getPool(deps, accountId, id);
}

/**
 * Deletes the pool and destroys its unclaimed machines; claimed machines are not touched.
 * @throws AppError 404 for an unknown pool or another account's.
 */
export async function deletePool(deps: Deps, provider: MachineProvider, accountId: string, id: string): Promise<void> {
  const pool = await getPoolRow(deps, accountId, id);
  const doomed = await inTransaction(deps.database, async (tx) => {
    if ((await lockPool(tx.db, pool.id)) === undefined) return [];
    const marked = await markForDestruction(deps, tx, await warmPoolMachines(tx.db, pool.id, MAX_POOL_MACHINES));
    await deletePoolRow(tx.db, pool.id);
    return marked;
  });
  await destroyMarked(deps, provider, doomed);
}

/** Within the pool's transaction, the machines to destroy become `stopping` (so no claim takes them); the host is asked after commit. */
async function markForDestruction(deps: Deps, tx: Tx, machines: MachineRow[]): Promise<MachineRow[]> {
  const marked: MachineRow[] = [];
  for (const machine of machines) {
    const stopping = await markStopping(deps, tx, machine, { action: 'destroy', reason: 'pool' });
    if (stopping !== null) marked.push(stopping);
  }
  return marked;
}

/** After commit: asks the host to destroy what markForDestruction marked, with `machine.destroyed` (or `machine.error`) each. */
export async function destroyMarked(deps: Deps, provider: MachineProvider, machines: MachineRow[]): Promise<void> {
  for (const machine of machines) await finishPending(deps, provider, machine);
}

export interface Refill {
  /** Surplus machines marked for destruction: the caller hands them to destroyMarked once the transaction has committed. */
  surplus: MachineRow[];
  /** Replacements the host refused to boot: the pool's refill job tries again later. */
  bootFailures: number;
}

/** A refill in a request's transaction: boots the host refused are left to the pool's refill job, a little later. Answers the surplus to destroy after commit. */
async function refillOrRetry(deps: Deps, provider: MachineProvider, tx: Tx, poolId: string): Promise<MachineRow[]> {
  const refill = await refillPool(deps, provider, tx, poolId);
  if (refill.bootFailures > 0) await deps.jobs.schedule(tx, poolRefillJob, poolId, { poolId }, deps.clock.now() + hostRetryDelay(1)!);
  return refill.surplus;
}

/**
 * Brings the pool to `count` warm (starting or running) machines, under the
 * pool's row lock so that two processes never both fill the same gap.
 */
export async function refillPool(deps: Deps, provider: MachineProvider, tx: Tx, poolId: string): Promise<Refill> {
  const pool = await lockPool(tx.db, poolId);
  if (pool === undefined) return { surplus: [], bootFailures: 0 };
  const warm = await warmPoolMachines(tx.db, pool.id, MAX_POOL_MACHINES);
  let bootFailures = 0;
  // No new warm machines on an empty balance (they would be stopped at once); the pool fills again at its next refill.
  const unpaid = warm.length < pool.count && (await balanceIsEmpty(deps, pool.account_id, tx.db));
  const template = pool.template_id === null || warm.length >= pool.count ? null : ((await findTemplate(tx.db, pool.account_id, pool.template_id)) ?? null);
  for (let i = unpaid ? pool.count : warm.length; i < pool.count; i++) {
    const booted = await newPoolMachine(deps, provider, tx, pool, template);
    if (booted === null) {
      bootFailures++;
      continue;
    }
    await insertMachine(tx.db, booted.machine);
    await scheduleCheck(deps, tx, booted.machine.id, booted.checkAt);
  }
  // Surplus: the last ones (still starting, newest) go first.
  return { surplus: await markForDestruction(deps, tx, warm.slice(pool.count).reverse()), bootFailures };
}

/** A warm machine for the pool, booting, and when to ask about it; null when the host refuses the boot (logged: nobody asked for this machine, so no event). */
async function newPoolMachine(deps: Deps, provider: MachineProvider, tx: Tx, pool: PoolRow, template: TemplateRow | null): Promise<{ machine: MachineRow; checkAt: number } | null> {
  const now = deps.clock.now();
  const id = newId('mch', now);
  let host: string;
  try {
    // The most room: a pool's machines spread over the hosts. No room: the pool stays short, and its refill is tried again.
    host = await placeMachine(deps, provider, tx.db, pool.size, { prefer: template?.host });
  } catch (err) {
    deps.logger.warn({ err, poolId: pool.id }, 'no host has room for a pool machine');
    return null;
  }
  const row: MachineRow = {
    id,
    account_id: pool.account_id,
    lost_with_host: 0,
    name: `${pool.name}-${id.slice(-6)}`,
    size: pool.size,
    external_id: '',
    labels: '{}',
    status: 'starting',
    status_changed_at: now,
    version: 0,
    booted_at: null,
    pool_id: pool.id,
    host,
    on_expire: 'stop',
    expires_at: null,
    expired_at: null,
    mcp_token_hash: null,
    pending_action: null,
    pending_reason: null,
    screen_width: null,
    screen_height: null,
    ...(template === null ? { env_names: '[]', env_sealed: null } : envFromTemplate(deps, template, {})),
    image: template?.image ?? DEFAULT_IMAGE_NAME,
    template_id: template?.id ?? null,
    network: null,
    // A warm machine never idles in its pool; its claim gives it the claimer's autoStopMinutes.
    auto_stop_minutes: 0,
    last_active_at: null,
    created_at: now,
    updated_at: now,
  };
  try {
    // Booted before it is inserted, in the pool's transaction: a refused boot leaves no row behind, and the pool stays short for its refill job to retry.
    return { machine: row, checkAt: (await provider.boot(toProviderMachine(row), now)).checkAt };
  } catch (err) {
    deps.logger.error({ err, poolId: pool.id }, 'the host failed to boot a pool machine');
    return null;
  }
}

/**
 * Hands out a warm machine of the pool (a running one if there is one) with
 * the caller's name, labels and expiry and a fresh token, emits
 * `machine.claimed`, and boots a replacement in the same transaction.
 * @throws AppError 404 unknown pool, 400 size differs from the pool's, 409 pool_empty.
 */
export async function claimFromPool(
  deps: Deps,
  provider: MachineProvider,
  accountId: string,
  poolRef: string,
  fields: MachineFields,
): Promise<MachineWithToken> {
  const pool = await findPoolByRef(deps.db, accountId, poolRef);
  if (pool === undefined) throw poolNotFound();
  await requireBalance(deps, accountId);
  if (fields.size !== undefined && fields.size !== pool.size) {
    throw invalidRequest(`size must be the pool's size (${pool.size}) or left out.`);
  }
  const mcpToken = generateToken('tmm_');
  const claimed = await inTransaction(deps.database, async (tx) => {
    // Claims and refills of one pool queue on its lock: always pool first, then machines, so they cannot deadlock.
    if ((await lockPool(tx.db, pool.id)) === undefined) throw poolNotFound();
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const candidates = await warmPoolMachines(tx.db, pool.id, 5);
      if (candidates.length === 0) break;
      for (const candidate of candidates) {
        const changes = {
          pool_id: null,
          name: fields.name,
          external_id: fields.externalId,
          labels: JSON.stringify(fields.labels),
          expires_at: fields.expiresAt,
          on_expire: fields.onExpire,
          mcp_token_hash: hashToken(mcpToken),
          auto_stop_minutes: fields.autoStopMinutes,
          // Its idle time counts from the claim, not from its boot in the pool.
          last_active_at: deps.clock.now(),
        };
        const now = deps.clock.now();
        if (!(await updateMachineIf(tx.db, candidate, changes, now))) continue;
        const machine: MachineRow = { ...candidate, ...changes, version: candidate.version + 1, updated_at: now };
        await emitMachineEvent(deps, tx, 'machine.claimed', machine, { pool: { id: pool.id, name: pool.name } });
        await scheduleExpiry(deps, tx, machine);
        await scheduleIdleCheck(deps, tx, machine);
        // A claim only ever shortens the pool, so there is no surplus to destroy.
        await refillOrRetry(deps, provider, tx, pool.id);
        return machine;
      }
    }
    return null;
  });
  if (claimed === null) throw poolEmpty(pool.name);
  return { ...toMachineView(claimed), mcpToken };
}
