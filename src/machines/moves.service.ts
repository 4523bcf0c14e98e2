import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { HostRefused } from '../hosts/hosts.admin.ts';
import { findHost, listHosts, moveTemplateRecord, setHostState } from '../hosts/hosts.repository.ts';
import { placeMovedMachine } from '../hosts/hosts.service.ts';
import { advanceMove, findMove, movesOf, recordMove, type MoveRow } from '../hosts/moves.repository.ts';
import type { Outcome } from '../jobs/job-kind.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { SECOND } from '../shared/clock.ts';
import { machineMoveJob, templateMoveJob } from './job-types.ts';
import { markMoveEnded, markMoving } from './machine-transitions.ts';
import { findMachineById, toProviderMachine, type MachineRow } from './machines.repository.ts';

/**
 * Moving machines off a draining host (`npm run hosts -- drain <name>
 * --move`). Each machine's move is a job that goes step by step, each step
 * recorded in `machine_moves` before it is done:
 *
 * - `waiting`: nothing done. The machine is held `stopping` (markMoving) in
 *   the transaction that picks its new host and records `copying`.
 * - `copying`: its container is stopped on the old host and copied to the new
 *   one, not started. Killed here, the next process does it again from the
 *   start (the copy replaces any half-made one), then commits.
 * - the commit: one compare-and-set of the machine's host (and its status, back
 *   to what it was: markMoveEnded) with `committed`, in one transaction.
 * - `committed`: the container on the old host is removed, then `done`.
 *
 * A failure before the commit rolls back: the machine goes back to what it was
 * where it was, the copy on the new host is removed, and the move is `failed`
 * with the reason. So the machine is on one host only, in the record and on
 * the engines, and it never runs on two.
 */

/** How soon a move looks again at a machine whose boot or stop is under way. */
const BUSY_RECHECK_MS = 2 * SECOND;

const DONE: Outcome = { status: 'done' };

/** Tests only: awaited after a step, so a test can stop a process there (a crash in the middle of a move). */
export const moveTestHooks: { afterStep?: (machineId: string, step: 'copied' | 'committed') => Promise<void> } = {};

/**
 * drain --move: the host draining, a move recorded for each of its
 * machines and its templates' disks, in one transaction (a machine placed there meanwhile is either
 * counted or placed elsewhere). A machine whose move is under way already
 * keeps it; one whose move failed is tried again. Answers the machines the
 * host holds.
 * @throws HostRefused for an unknown host, or a lost one (its engine does not answer: nothing can be copied off it).
 */
export async function drainAndMove(deps: Pick<Deps, 'database' | 'clock' | 'jobs'>, name: string): Promise<string[]> {
  const host = await findHost(deps.database.db, name);
  if (host === undefined) throw new HostRefused(`there is no host named ${name}`);
  if (host.state === 'lost') throw new HostRefused(`the host ${name} is lost (its engine does not answer): nothing can be copied off it; destroy its machines, or bring it back first`);
  return inTransaction(deps.database, async (tx) => {
    const now = deps.clock.now();
    await setHostState(tx.db, name, 'draining', now);
    const rows = await tx.db.selectFrom('machines').select('id').where('host', '=', name).where('status', '!=', 'destroyed').orderBy('id').execute();
    for (const { id } of rows) {
      if (await recordMove(tx.db, id, name, now)) await deps.jobs.schedule(tx, machineMoveJob, id, { machineId: id }, now);
    }
    for (const { id } of await tx.db.selectFrom('templates').select('id').where('host', '=', name).execute()) {
      await deps.jobs.schedule(tx, templateMoveJob, id, { templateId: id, from: name }, now);
    }
    return rows.map((row) => row.id);
  });
}

/** One attempt of a machine's move: its steps from where the record says, to the end or to a failure. */
export async function moveMachine(deps: Deps, provider: MachineProvider, machineId: string): Promise<Outcome> {
  let move = await findMove(deps.db, machineId);
  if (move?.step === 'waiting') {
    const outcome = await beginMove(deps, move);
    if (outcome !== null) return outcome;
    move = await findMove(deps.db, machineId);
  }
  if (move?.step === 'copying') {
    const outcome = await copyAndCommit(deps, provider, move);
    if (outcome !== null) return outcome;
    await moveTestHooks.afterStep?.(machineId, 'committed');
    move = await findMove(deps.db, machineId);
  }
  if (move?.step === 'committed') {
    const machine = await findMachineById(deps.db, machineId);
    // The old host still has the container; the machine is the new host's (and may run there already). A host
    // removed meanwhile is no longer anyone's to clean: its containers went with it.
    const oldHostRecorded = (await findHost(deps.db, move.from_host)) !== undefined;
    if (machine !== undefined && oldHostRecorded) await provider.hosts!.removeCopy(toProviderMachine(machine), move.from_host);
    const outcome = oldHostRecorded ? `moved to ${move.to_host}` : `moved to ${move.to_host} (its old host was removed before its old copy was)`;
    await advanceMove(deps.db, machineId, 'committed', { step: 'done', outcome }, deps.clock.now());
  }
  return DONE;
}

/** `waiting` → `copying`: the new host chosen and the machine held. Null when begun; else the attempt's outcome. */
async function beginMove(deps: Deps, move: MoveRow): Promise<Outcome | null> {
  const machine = await findMachineById(deps.db, move.machine_id);
  const now = deps.clock.now();
  if (machine === undefined || machine.status === 'destroyed' || machine.host !== move.from_host) {
    await advanceMove(deps.db, move.machine_id, 'waiting', { step: 'done', outcome: 'nothing to move: destroyed, or on another host already' }, now);
    return DONE;
  }
  // A boot or a stop under way finishes first (a move held by another process's attempt: that one goes on).
  if (machine.status === 'starting' || machine.status === 'stopping') return { status: 'later', at: now + BUSY_RECHECK_MS };
  const begun = await inTransaction(deps.database, async (tx) => {
    const to = await placeMovedMachine(deps, tx.db, machine.size, move.from_host);
    if (to === null) {
      await advanceMove(tx.db, machine.id, 'waiting', { step: 'failed', outcome: `no active host has room for a ${machine.size} machine: it stays on ${move.from_host}` }, now);
      return 'no room' as const;
    }
    if ((await markMoving(deps, tx, machine)) === null) return 'changed' as const;
    await advanceMove(tx.db, machine.id, 'waiting', { step: 'copying', to_host: to, prior_status: machine.status, prior_status_changed_at: machine.status_changed_at }, now);
    return 'begun' as const;
  });
  if (begun === 'no room') return DONE;
  // Changed meanwhile (a stop, a run): looked at again at once.
  if (begun === 'changed') return { status: 'later', at: now };
  return null;
}

/** Whether the machine is still held by its move, on its old host. */
const heldByMove = (machine: MachineRow | undefined, move: MoveRow): machine is MachineRow =>
  machine !== undefined && machine.host === move.from_host && machine.status === 'stopping' && machine.pending_action === 'move';

/** `copying` → `committed`: stopped, copied, and the record moved. Null when committed; else the attempt's outcome. */
async function copyAndCommit(deps: Deps, provider: MachineProvider, move: MoveRow): Promise<Outcome | null> {
  const to = move.to_host!;
  const prior = { status: move.prior_status!, statusChangedAt: Number(move.prior_status_changed_at) };
  const machine = await findMachineById(deps.db, move.machine_id);
  if (!heldByMove(machine, move)) return rollBack(deps, provider, move, machine, 'the machine changed during its move (its host lost, say)');
  try {
    await provider.stop(toProviderMachine(machine));
    await provider.hosts!.copyMachine(toProviderMachine(machine), to);
  } catch (error) {
    deps.logger.warn({ err: error, machineId: machine.id, from: move.from_host, to }, 'a machine could not be copied to another host; it stays where it was');
    return rollBack(deps, provider, move, machine, `the copy to ${to} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  await moveTestHooks.afterStep?.(machine.id, 'copied');
  const committed = await inTransaction(deps.database, async (tx) => {
    const current = await findMachineById(tx.db, machine.id);
    if (!heldByMove(current, move)) return false;
    if ((await markMoveEnded(deps, tx, current, prior, to)) === null) return false;
    return advanceMove(tx.db, machine.id, 'copying', { step: 'committed' }, deps.clock.now());
  });
  if (committed) return null;
  // The machine changed between the copy and the commit (a new token changes its version only: read again and commit).
  const current = await findMachineById(deps.db, machine.id);
  if (heldByMove(current, move)) return { status: 'later', at: deps.clock.now() };
  return rollBack(deps, provider, move, current, 'the machine changed during its move (its host lost, say)');
}

/**
 * Before the commit, the move given up: the machine back to what it was on its
 * old host (when the move still holds it), the move `failed`, then the copy on
 * the new host removed (when that host does not answer, the outcome says the
 * copy may be left there, never started).
 */
async function rollBack(deps: Deps, provider: MachineProvider, move: MoveRow, machine: MachineRow | undefined, why: string): Promise<Outcome> {
  const prior = { status: move.prior_status!, statusChangedAt: Number(move.prior_status_changed_at) };
  const undone = await inTransaction(deps.database, async (tx) => {
    const current = await findMachineById(tx.db, move.machine_id);
    if (heldByMove(current, move) && (await markMoveEnded(deps, tx, current, prior)) === null) return false;
    return advanceMove(tx.db, move.machine_id, 'copying', { step: 'failed', outcome: why }, deps.clock.now());
  });
  if (!undone) return { status: 'later', at: deps.clock.now() };
  if (machine === undefined || machine.host === move.to_host) return DONE;
  await provider.hosts!.removeCopy(toProviderMachine(machine), move.to_host!).catch(async (err: unknown) => {
    deps.logger.warn({ err, machineId: move.machine_id, host: move.to_host }, 'the copy of a machine whose move failed could not be removed');
    const left = `${why} (a stopped copy may be left on ${move.to_host}: it is never started; a later move there replaces it)`;
    await advanceMove(deps.db, move.machine_id, 'failed', { step: 'failed', outcome: left }, deps.clock.now());
  });
  return DONE;
}

/**
 * A template's disk copied off a draining host to an active one (the first
 * by name: a template takes disk, not CPUs), then its record moved there; its
 * copy on the old host goes with that host. No active host: tried again later.
 */
export async function moveTemplate(deps: Deps, provider: MachineProvider, templateId: string, from: string): Promise<Outcome> {
  const template = await deps.db.selectFrom('templates').select(['id', 'host']).where('id', '=', templateId).executeTakeFirst();
  if (template === undefined || template.host !== from || provider.templates === undefined) return DONE;
  const to = (await listHosts(deps.db)).find((host) => host.state === 'active' && host.name !== from)?.name;
  if (to === undefined) return { status: 'failed', error: `no active host to carry the template ${templateId} to` };
  await provider.templates.copy(templateId, from, to);
  await moveTemplateRecord(deps.db, templateId, from, to);
  return DONE;
}

/** How often drain --move reads its moves while it waits. */
const FOLLOW_POLL_MS = SECOND;

/**
 * Waits until none of these machines' moves is under way, telling `say` of
 * each step as it is seen; answers the moves as they ended (done, failed).
 */
export async function followMoves(deps: Pick<Deps, 'db'>, machineIds: readonly string[], say: (line: string) => void, pollMs = FOLLOW_POLL_MS): Promise<MoveRow[]> {
  const seen = new Map<string, string>();
  for (;;) {
    const moves = await movesOf(deps.db, machineIds);
    for (const move of moves) {
      const line = describeMove(move);
      if (seen.get(move.machine_id) !== line) say(`${move.machine_id}: ${line}`);
      seen.set(move.machine_id, line);
    }
    if (moves.every((move) => move.step === 'done' || move.step === 'failed')) return moves;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

function describeMove(move: MoveRow): string {
  switch (move.step) {
    case 'waiting':
      return 'waiting for the service to take it up';
    case 'copying':
      return `stopped and being copied to ${move.to_host}`;
    case 'committed':
      return `on ${move.to_host}; its copy on ${move.from_host} being removed`;
    case 'done':
      return move.outcome ?? 'done';
    case 'failed':
      return `not moved: ${move.outcome}`;
  }
}
