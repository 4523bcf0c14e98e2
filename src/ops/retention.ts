import { Counter } from 'prom-client';
import type { Deps } from '../deps.ts';
import { jobType } from '../jobs/job-kind.ts';
import type { Recurring } from '../jobs/recurring.ts';
import { MINUTE, SECOND } from '../shared/clock.ts';

/**
 * Retention: what is older than RETENTION, or can no longer
 * matter, is deleted by one recurring job in small batches, each its own
 * short transaction, so no lock is held long enough to delay a request or a
 * delivery. Domains register a pruner per kind of row; the job runs them all
 * at least once a minute (or once per tenth of RETENTION, if shorter).
 */
export const retentionJob = jobType<Record<string, never>>('retention');

/** Rows a pruner deletes per call, at most (each call one short transaction). */
export const RETENTION_BATCH = 250;
/** Work per run of the job before it lets other work in. */
const RUN_BUDGET_MS = { sqlite: 20, postgres: 50 } as const;
/**
 * The share of time a backlog is worked on: after a run of `t` ms the next
 * starts `t × (1 / duty − 1)` later. On SQLite, whose single writer runs in
 * this process's thread, about an eighth, so deliveries keep most of both;
 * on PostgreSQL, where the deletes run in the server and lock only their own
 * rows, half (bench/retention.ts measures both).
 */
const DUTY = { sqlite: 0.12, postgres: 0.5 } as const;

export interface PruneContext {
  now: number;
  /** now − RETENTION: rows kept for the retention period are those made at or after it. */
  cutoff: number;
}

/**
 * One batch of a kind's cleanup: at most `limit` rows, after `cursor` (where
 * the previous batch of this pass stopped, undefined at the start). Answers
 * the rows deleted by kind, and where to go on from, or null when done.
 */
export type Pruner = (context: PruneContext, cursor: string | undefined, limit: number) => Promise<{ deleted: Record<string, number>; cursor: string | null }>;

export type KeySelect = (context: PruneContext, after: string | undefined, limit: number) => Promise<string[]>;
export type KeyRemove = (context: PruneContext, keys: string[]) => Promise<number>;

/** How domains register their cleanup (through the app, so they import nothing of ops/). */
export interface Retention {
  add(name: string, prune: Pruner): void;
  /** Rows of one kind whose key orders them: `select` finds a batch of keys after the cursor, `remove` deletes those still due. */
  addKeyed(kind: string, select: KeySelect, remove: KeyRemove): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    retention: Retention;
  }
}

/** The job, its pruners and its counters: `retention_deleted_rows_total{kind}`. */
export function createRetention(deps: Deps, registry: import('prom-client').Registry, options: { budgetMs?: number; duty?: number } = {}) {
  const pruners = new Map<string, Pruner>();
  const deletedRows = new Counter({ name: 'retention_deleted_rows_total', help: 'Rows deleted by retention, by kind', labelNames: ['kind'] as const, registers: [registry] });
  const budgetMs = options.budgetMs ?? RUN_BUDGET_MS[deps.database.engine];
  const duty = options.duty ?? DUTY[deps.database.engine];
  /** Where each pruner stands in the current pass (this process's; another process starts its pass afresh). */
  let cursors = new Map<string, string | undefined>();

  const recurring: Recurring = {
    type: retentionJob,
    intervalMs: Math.min(MINUTE, Math.floor(deps.config.retention.periodMs / 10)),
    firstRetryMs: 5 * SECOND,
    async run() {
      if (cursors.size === 0) for (const name of pruners.keys()) cursors.set(name, undefined);
      const now = deps.clock.now();
      const context = { now, cutoff: now - deps.config.retention.periodMs };
      const started = performance.now();
      passes: while (cursors.size > 0) for (const [name, cursor] of cursors) {
        try {
          const { deleted, cursor: next } = await pruners.get(name)!(context, cursor, RETENTION_BATCH);
          for (const [rows, count] of Object.entries(deleted)) if (count > 0) deletedRows.inc({ kind: rows }, count);
          if (next === null) cursors.delete(name);
          else cursors.set(name, next);
        } catch (err) {
          deps.logger.error({ err, kind: name }, 'a retention batch failed; it is tried again in the next pass');
          cursors.delete(name);
        }
        if (performance.now() - started > budgetMs) break passes;
      }
      const worked = performance.now() - started;
      if (cursors.size > 0) return deps.clock.now() + Math.ceil(worked * (1 / duty - 1));
      // The pass is done: the next one in an interval.
      cursors = new Map();
    },
  };
  const retention: Retention = {
    add: (name, prune) => void pruners.set(name, prune),
    addKeyed: (rows, select, remove) => void pruners.set(rows, keyedPruner(rows, select, remove)),
  };
  return { recurring, retention, deletedRows };
}

/** A pruner for rows whose key orders them (by time): each batch deletes up to `limit` of the matching keys after the cursor. */
export function keyedPruner(kind: string, select: KeySelect, remove: KeyRemove): Pruner {
  return async (context, cursor, limit) => {
    const keys = await select(context, cursor, limit);
    const deleted = keys.length === 0 ? 0 : await remove(context, keys);
    return { deleted: { [kind]: deleted }, cursor: keys.length < limit ? null : keys.at(-1)! };
  };
}
