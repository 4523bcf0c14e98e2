import type { Updateable } from 'kysely';
import { meterTransition } from '../billing/metering.ts';
import type { Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { machineCheckJob, machineExpireJob, poolRefillJob } from './job-types.ts';
import { toIso } from '../shared/clock.ts';
import { emitMachineEvent } from './machine-events.ts';
import { updateMachineIf, type IdleGuard, type MachineRow } from './machines.repository.ts';
import { scheduleIdleCheck } from './activity.ts';
import type { MachinesTable } from './machines.tables.ts';

/**
 * Every state change of a machine, each a compare-and-set on its version
 * with its event and its next background work (a check with the provider, a
 * pool refill, the runs it lets go) in the same transaction. Each returns the
 * machine as it now is, or null when another request or process changed it
 * first (and so emitted whatever event was due). Calling the provider is the
 * caller's job.
 */

/** `data.detail.reason` of `machine.stopped`. */
export type StopReason = 'requested' | 'expired' | 'balance-empty' | 'platform' | 'idle' | `after schedule ${string}` | `after webhook ${string}`;

/** `data.detail.reason` of `machine.destroyed`. */
export type DestroyReason = 'requested' | 'expired' | 'pool';

/** `data.detail.reason` of `machine.error`: the host's own verdicts, and its failures to do what it was asked. */
export type ErrorReason = 'boot-failure' | 'crash' | 'stop-failure' | 'destroy-failure' | 'host-lost';

export type Pending = { action: 'stop'; reason: StopReason } | { action: 'destroy'; reason: DestroyReason };

/** How long a stop or destroy may take before the worker assumes its process died and finishes it. */
export const PENDING_ACTION_GRACE_MS = 60_000;

/** Leaving a state: nothing pending any more, nothing waiting for a lost host. */
const SETTLED = { pending_action: null, pending_reason: null, lost_with_host: 0 } as const;

async function change(deps: Deps, tx: Tx, row: MachineRow, changes: Updateable<MachinesTable>, idle?: IdleGuard): Promise<MachineRow | null> {
  const now = deps.clock.now();
  if (!(await updateMachineIf(tx.db, row, changes, now, idle))) return null;
  // Running time is metered from the moment a machine becomes running until it leaves it, in this same transaction.
  if (changes.status !== undefined && changes.status !== row.status) {
    await meterTransition(deps, tx, row, row.status, changes.status as string, (changes.status_changed_at as number | undefined) ?? now);
  }
  return { ...row, ...changes, version: row.version + 1, updated_at: now } as MachineRow;
}

/** When to ask the provider about the machine next (null: nothing to ask until its next boot). */
export async function scheduleCheck(deps: Deps, tx: Tx, machineId: string, at: number | null): Promise<void> {
  if (at === null) await deps.jobs.cancel(tx, machineCheckJob, machineId);
  else await deps.jobs.schedule(tx, machineCheckJob, machineId, { machineId }, at);
}

/** The machine's expiry, if it has one. */
export async function scheduleExpiry(deps: Deps, tx: Tx, row: Pick<MachineRow, 'id' | 'expires_at'>): Promise<void> {
  if (row.expires_at !== null) await deps.jobs.schedule(tx, machineExpireJob, row.id, { machineId: row.id }, row.expires_at);
}

/** A pooled machine left its pool (failed, stopped, destroyed): the pool is short of one. */
async function refillPoolOf(deps: Deps, tx: Tx, row: MachineRow): Promise<void> {
  if (row.pool_id !== null) await deps.jobs.schedule(tx, poolRefillJob, row.pool_id, { poolId: row.pool_id }, deps.clock.now());
}

/**
 * Booting: from a stop or an error, before the host is asked. `checkAt` is when
 * to ask the provider if nobody records the boot's own answer first.
 */
export async function markStarting(deps: Deps, tx: Tx, row: MachineRow, checkAt: number): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { ...SETTLED, status: 'starting', status_changed_at: deps.clock.now() });
  if (updated !== null) await scheduleCheck(deps, tx, row.id, checkAt);
  return updated;
}

/**
 * A stop or destroy about to be asked of the host: `stopping`, with what is
 * pending, so that the host is called only by whoever won this compare-and-set,
 * and a process that dies before recording the outcome leaves work the worker
 * finishes after PENDING_ACTION_GRACE_MS. No event: `machine.stopped` or
 * `machine.destroyed` follows once the host has done it. With `idle` (an idle
 * stop), only if the machine is still idle as the guard says.
 */
export async function markStopping(deps: Deps, tx: Tx, row: MachineRow, pending: Pending, idle?: IdleGuard): Promise<MachineRow | null> {
  const now = deps.clock.now();
  const updated = await change(deps, tx, row, { status: 'stopping', status_changed_at: now, pending_action: pending.action, pending_reason: pending.reason }, idle);
  if (updated !== null) await scheduleCheck(deps, tx, row.id, now + PENDING_ACTION_GRACE_MS);
  return updated;
}

async function wentDown(deps: Deps, tx: Tx, machine: MachineRow, cause: string): Promise<void> {
  for (const follower of deps.machineFollowers) await follower.down?.(deps, tx, machine, cause);
}

/** A finished boot: `machine.created` the first time, `machine.started` after that; the runs waiting for it go. */
export async function markRunning(deps: Deps, tx: Tx, row: MachineRow, checkAt: number | null, detail?: Record<string, unknown>): Promise<MachineRow | null> {
  const now = deps.clock.now();
  const updated = await change(deps, tx, row, { ...SETTLED, status: 'running', status_changed_at: now, booted_at: row.booted_at ?? now });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, checkAt);
  await scheduleIdleCheck(deps, tx, updated);
  await emitMachineEvent(deps, tx, row.booted_at === null ? 'machine.created' : 'machine.started', updated, detail);
  for (const follower of deps.machineFollowers) await follower.running?.(deps, tx, updated);
  return updated;
}

/** Frozen with its memory and processes: `machine.paused`; still checked, so a machine that ends while paused is seen. */
export async function markPaused(deps: Deps, tx: Tx, row: MachineRow, checkAt: number | null): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { status: 'paused', status_changed_at: deps.clock.now() });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, checkAt);
  await emitMachineEvent(deps, tx, 'machine.paused', updated);
  return updated;
}

/** Going on from where it was frozen: `machine.resumed` (never `machine.started`: it never stopped). */
export async function markResumed(deps: Deps, tx: Tx, row: MachineRow, checkAt: number | null): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { status: 'running', status_changed_at: deps.clock.now() });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, checkAt);
  await scheduleIdleCheck(deps, tx, updated);
  await emitMachineEvent(deps, tx, 'machine.resumed', updated);
  return updated;
}

export async function markError(deps: Deps, tx: Tx, row: MachineRow, reason: ErrorReason, message: string): Promise<MachineRow | null> {
  // Host-lost: what it really is is asked once the host answers again (host-loss.ts); other errors stay as they are.
  const lost = reason === 'host-lost' ? 1 : 0;
  const updated = await change(deps, tx, row, { ...SETTLED, status: 'error', status_changed_at: deps.clock.now(), pool_id: null, lost_with_host: lost });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, null);
  await refillPoolOf(deps, tx, row);
  await emitMachineEvent(deps, tx, 'machine.error', updated, { reason, message });
  await wentDown(deps, tx, updated, `The machine failed (${reason})`);
  return updated;
}

export async function markStopped(deps: Deps, tx: Tx, row: MachineRow, reason: StopReason): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { ...SETTLED, status: 'stopped', status_changed_at: deps.clock.now(), pool_id: null });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, null);
  await refillPoolOf(deps, tx, row);
  await emitMachineEvent(deps, tx, 'machine.stopped', updated, { reason });
  await wentDown(deps, tx, updated, `The machine stopped (${reason})`);
  return updated;
}

/**
 * Destroyed machines keep their row (events refer to them) but lose their
 * token, triggers and live views. `leftOnLostHost`: its host does not answer,
 * so its container is still there, to be removed once the host answers again.
 */
export async function markDestroyed(deps: Deps, tx: Tx, row: MachineRow, reason: DestroyReason, leftOnLostHost = false): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, {
    ...SETTLED,
    lost_with_host: leftOnLostHost ? 1 : 0,
    status: 'destroyed',
    status_changed_at: deps.clock.now(),
    pool_id: null,
    mcp_token_hash: null,
  });
  if (updated === null) return null;
  await scheduleCheck(deps, tx, row.id, null);
  await deps.jobs.cancel(tx, machineExpireJob, row.id);
  await refillPoolOf(deps, tx, row);
  await emitMachineEvent(deps, tx, 'machine.destroyed', updated, { reason });
  await wentDown(deps, tx, updated, 'The machine was destroyed');
  for (const follower of deps.machineFollowers) await follower.destroyed?.(deps, tx, updated);
  return updated;
}

/** `machine.expired`, carrying the status the machine had when it expired; the stop or destroy follows. */
export async function markExpired(deps: Deps, tx: Tx, row: MachineRow): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { expired_at: deps.clock.now() });
  if (updated === null) return null;
  await emitMachineEvent(deps, tx, 'machine.expired', updated, { expiresAt: toIso(row.expires_at!), onExpire: row.on_expire });
  return updated;
}

/**
 * A move to another host begins (moves.service.ts): the machine is held
 * `stopping` with pending action `move` (so neither its owner nor any job
 * starts, stops or destroys it meanwhile; its checks wait) while its container
 * is stopped and copied. No event: a stop's beginning has none.
 */
export async function markMoving(deps: Deps, tx: Tx, row: MachineRow): Promise<MachineRow | null> {
  const updated = await change(deps, tx, row, { status: 'stopping', status_changed_at: deps.clock.now(), pending_action: 'move', pending_reason: null });
  if (updated !== null) await scheduleCheck(deps, tx, row.id, null);
  return updated;
}

/**
 * The end of a move: committed (`host`, the machine's new host, in the same
 * compare-and-set) or rolled back (none). The machine leaves `stopping` for
 * what it was: one that ran was stopped for the copy (`machine.stopped`,
 * reason `platform`) and starts again (`starting`, its check boots it:
 * `machine.started`); a paused one is stopped (its memory is not carried); a
 * stopped or failed one is as it was, with no event.
 */
export async function markMoveEnded(deps: Deps, tx: Tx, row: MachineRow, prior: { status: string; statusChangedAt: number }, host?: string): Promise<MachineRow | null> {
  const now = deps.clock.now();
  const moved = host === undefined ? {} : { host };
  const ran = prior.status === 'running' || prior.status === 'starting';
  if (ran && row.booted_at === null) {
    // Never booted yet: it simply boots where it now is (`machine.created` follows).
    const starting = await change(deps, tx, row, { ...SETTLED, ...moved, status: 'starting', status_changed_at: now });
    if (starting !== null) await scheduleCheck(deps, tx, row.id, now);
    return starting;
  }
  if (ran || prior.status === 'paused') {
    const stopped = await change(deps, tx, row, { ...SETTLED, ...moved, status: 'stopped', status_changed_at: now });
    if (stopped === null) return null;
    await emitMachineEvent(deps, tx, 'machine.stopped', stopped, { reason: 'platform' satisfies StopReason });
    await wentDown(deps, tx, stopped, 'The machine stopped (platform)');
    return ran ? markStarting(deps, tx, stopped, now) : stopped;
  }
  return change(deps, tx, row, { ...SETTLED, ...moved, status: prior.status as MachineRow['status'], status_changed_at: prior.statusChangedAt });
}
