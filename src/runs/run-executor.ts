import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { MachineProvider } from '../machines/provider.ts';
import type { Deps } from '../shared/deps.ts';
import { findRunById, renewRunLeases, type RunRow } from './runs.repository.ts';
import { executeRun, RUN_LEASE_MS } from './runs.service.ts';

/** Runs executing at once in one process: a slow command holds one slot, never a request or the worker pass. */
export const RUN_CONCURRENCY = 8;
/** Beyond this the executor takes no more ids; they stay pending in the database and the worker hands them over later. */
const MAX_QUEUED = 10_000;
const HEARTBEAT_MS = RUN_LEASE_MS / 3;
/** How often a waiter looks at the database, for runs finished by another process. */
const WAIT_POLL_MS = 250;

/**
 * Executes runs in the background of this process, at most RUN_CONCURRENCY
 * at a time. Requests and the worker pass only `submit` ids; the run is taken
 * with a compare-and-set (pending → running) under a lease that a heartbeat
 * renews while it executes, so another process fails it only if this one dies.
 */
export interface RunExecutor {
  /** This process's name in `runs.owner`. */
  readonly owner: string;
  /** Executes the pending run soon; harmless for a run already taken, here or elsewhere. */
  submit(runId: string): void;
  /** The run once it has finished, or as it is after `timeoutMs` of real time. */
  waitFor(runId: string, timeoutMs: number): Promise<RunRow | undefined>;
  /** The heartbeat: the runs executing here stay this process's for another lease. */
  renewLeases(): Promise<void>;
  /** Resolves once nothing is queued or executing (tests, shutdown). */
  idle(): Promise<void>;
  /** Takes nothing more and waits at most `graceMs` for the runs executing; what is left is failed elsewhere once its lease ends. */
  stop(graceMs: number): Promise<void>;
}

export function createRunExecutor(deps: Deps, provider: MachineProvider, concurrency = RUN_CONCURRENCY): RunExecutor {
  const owner = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
  const queue: string[] = [];
  const queued = new Set<string>();
  const executing = new Map<string, Promise<void>>();
  const finishedListeners = new Map<string, Set<() => void>>();
  let pumpScheduled = false;
  let stopped = false;

  const pump = () => {
    pumpScheduled = false;
    while (!stopped && executing.size < concurrency && queue.length > 0) {
      const runId = queue.shift()!;
      queued.delete(runId);
      const task = executeRun(deps, provider, owner, runId)
        .catch((err: unknown) => deps.logger.error({ err, runId }, 'a run failed to execute'))
        .finally(() => {
          executing.delete(runId);
          for (const listener of finishedListeners.get(runId) ?? []) listener();
          schedulePump();
        });
      executing.set(runId, task);
    }
  };
  // Submissions come from after-commit callbacks and loops: start executing on the next turn, not inside them.
  const schedulePump = () => {
    if (pumpScheduled || stopped) return;
    pumpScheduled = true;
    setImmediate(pump);
  };

  const renewLeases = async () => {
    const now = deps.clock.now();
    await renewRunLeases(deps.db, owner, [...executing.keys()], now + RUN_LEASE_MS);
  };
  const heartbeat = setInterval(() => {
    renewLeases().catch((err: unknown) => deps.logger.error({ err }, 'could not renew run leases'));
  }, HEARTBEAT_MS);
  heartbeat.unref();

  return {
    owner,
    submit(runId) {
      if (stopped || queued.has(runId) || executing.has(runId) || queue.length >= MAX_QUEUED) return;
      queue.push(runId);
      queued.add(runId);
      schedulePump();
    },
    async waitFor(runId, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const run = await findRunById(deps.db, runId);
        if (run === undefined || run.status === 'succeeded' || run.status === 'failed' || Date.now() >= deadline) return run;
        await new Promise<void>((resolve) => {
          const listeners = finishedListeners.get(runId) ?? new Set();
          finishedListeners.set(runId, listeners);
          const done = () => {
            clearTimeout(timer);
            listeners.delete(done);
            if (listeners.size === 0) finishedListeners.delete(runId);
            resolve();
          };
          const timer = setTimeout(done, Math.max(0, Math.min(WAIT_POLL_MS, deadline - Date.now())));
          listeners.add(done);
        });
      }
    },
    renewLeases,
    async idle() {
      while (pumpScheduled || queue.length > 0 || executing.size > 0) {
        await Promise.allSettled([...executing.values()]);
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    async stop(graceMs) {
      stopped = true;
      clearInterval(heartbeat);
      queue.length = 0;
      queued.clear();
      if (executing.size === 0) return;
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
      });
      await Promise.race([Promise.allSettled([...executing.values()]), grace]);
      clearTimeout(timer);
    },
  };
}
