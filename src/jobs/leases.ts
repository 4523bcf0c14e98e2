import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import type { Clock } from '../shared/clock.ts';
import type { Job } from './job-kind.ts';
import { extendLeases } from './sql/extendLeases.ts';

/** An attempt whose lease would run out sooner than the next heartbeat and this is let go: the lease must not run out while it still runs. */
const LEASE_MARGIN_MS = 1000;

const leaseLost = () => new Error('this process no longer holds the job: another process may take it over');
const leaseRunningOut = () => new Error('this process could not renew its lease on the job in time');

/** A job this runner holds the lease of, and the way to let its attempt go while one runs. */
export interface Lease {
  kind: string;
  leaseMs: number;
  job: Job<unknown>;
  attempt: AbortController | null;
}

export interface LeaseDeps {
  db: Kysely<DB>;
  clock: Clock;
  logger: FastifyBaseLogger;
  runnerId: string;
}

/**
 * The jobs a runner holds, by id: queued, in flight, or attempted and waiting
 * for their settlement to be written. Their leases are renewed until then,
 * and a claim that finds one again (its lease looked out of date) must not
 * run it twice.
 */
export interface Leases {
  hold(kind: string, leaseMs: number, job: Job<unknown>): void;
  has(jobId: string): boolean;
  get(jobId: string): Lease | undefined;
  letGo(jobId: string): void;
  /**
   * Renews every lease held, and aborts an attempt whose job another process
   * holds now, or whose lease could not be renewed and would run out before
   * the next heartbeat (`intervalMs` from now): never two processes at once on
   * one job.
   */
  renew(intervalMs: number): Promise<void>;
  /** Aborts every attempt in flight. */
  abortAttempts(reason: Error): void;
}

export function createLeases(deps: LeaseDeps): Leases {
  const { db, clock, logger, runnerId } = deps;
  const holding = new Map<string, Lease>();

  async function renew(intervalMs: number): Promise<void> {
    const now = clock.now();
    const byKind = new Map<string, Lease[]>();
    for (const lease of holding.values()) {
      const leases = byKind.get(lease.kind) ?? [];
      leases.push(lease);
      byKind.set(lease.kind, leases);
    }
    for (const [kind, leases] of byKind) {
      const until = now + leases[0]!.leaseMs;
      try {
        const renewed = new Set(await extendLeases(db, runnerId, kind, until));
        for (const lease of leases) {
          if (renewed.has(lease.job.id)) lease.job.leaseUntil = until;
          // Held before this renewal began, and not renewed: settled meanwhile, or taken over after a stall.
          else if (lease.job.leaseUntil < until) lease.attempt?.abort(leaseLost());
        }
      } catch (err) {
        logger.error({ err, kind }, 'could not renew job leases; attempts whose lease would run out are aborted');
      }
    }
    const soonest = clock.now() + intervalMs + LEASE_MARGIN_MS;
    for (const lease of holding.values()) {
      if (lease.attempt !== null && lease.job.leaseUntil < soonest) lease.attempt.abort(leaseRunningOut());
    }
  }

  return {
    hold: (kind, leaseMs, job) => void holding.set(job.id, { kind, leaseMs, job, attempt: null }),
    has: (jobId) => holding.has(jobId),
    get: (jobId) => holding.get(jobId),
    letGo: (jobId) => void holding.delete(jobId),
    renew,
    abortAttempts(reason) {
      for (const lease of holding.values()) lease.attempt?.abort(reason);
    },
  };
}
