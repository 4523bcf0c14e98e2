import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType } from '../jobs/job-kind.ts';
import { MINUTE, SECOND } from '../shared/clock.ts';

/** The machine's next question to its provider (is the boot done? still up?), or the stop or destroy a dead process left unfinished. */
export const machineCheckJob = jobType<{ machineId: string }>('machine.check');
/** `machine.expired` at `expiresAt`, then the stop or destroy it asks for. */
export const machineExpireJob = jobType<{ machineId: string }>('machine.expire');
/** Idle stop: due when a running machine would have had no activity for its autoStopMinutes. */
export const machineIdleJob = jobType<{ machineId: string }>('machine.idle-stop');
/** A machine's move off a draining host (moves.service.ts), step by step. */
export const machineMoveJob = jobType<{ machineId: string }>('machine.move');
/** A template's disk copied off a draining host (moves.service.ts). */
export const templateMoveJob = jobType<{ templateId: string; from: string }>('template.move');
/** Brings a pool back to its count of warm machines. */
export const poolRefillJob = jobType<{ poolId: string }>('pool.refill');

/**
 * A host failing for one machine, schedule or pool is asked again soon, but
 * never crowds out the others: 5 s after the first failure, doubling, at most
 * 5 minutes apart, for as long as it takes.
 */
export const hostRetryDelay = exponentialBackoff({ firstMs: 5 * SECOND, maxMs: 5 * MINUTE, attempts: Infinity });
