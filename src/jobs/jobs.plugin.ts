import fp from 'fastify-plugin';
import { inTransaction } from '../db/transaction.ts';
import type { AnyJobKind } from './job-kind.ts';
import type { AnyLanedJobKind } from './laned-kind.ts';
import { ensureRecurring, recurringKind, type Recurring } from './recurring.ts';
import type { Runner } from './runner.ts';

/** The jobs module as the app exposes it to domains (registering kinds) and to tests (draining). */
export interface Jobs {
  /** Domains register the kinds of job they define; a process whose role runs no jobs (ROLE=api) keeps none. */
  register(kind: AnyJobKind): void;
  /** A kind whose jobs have lanes (laned-kind.ts), likewise. */
  registerLaned(kind: AnyLanedJobKind): void;
  /** Registers recurring work, and makes sure of its one job once the app is ready (every process, whatever its role). */
  recur(recurring: Recurring): void;
  /** Runs what is due now, and what that makes due now, until nothing is: tests call it after moving the clock. */
  drain(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    jobs: Jobs;
  }
}

export interface JobsPluginOptions {
  /** This process's runner; null when its role runs no jobs. */
  runner: Runner | null;
  /** How long shutdown waits for attempts in flight (each kind bounds its own). */
  stopGraceMs: number;
}

/** Starts the runner once the app is ready, wakes it when any process announces due work, stops it before the database closes. */
export const jobsPlugin = fp<JobsPluginOptions>(
  async (app, { runner, stopGraceMs }) => {
    app.decorate('jobs', {
      register: (kind: AnyJobKind) => runner?.register(kind),
      registerLaned: (kind: AnyLanedJobKind) => runner?.registerLaned(kind),
      recur: (recurring: Recurring) => {
        runner?.register(recurringKind(app.deps.clock, recurring));
        app.addHook('onReady', async () => inTransaction(app.deps.database, (tx) => ensureRecurring(app.deps.jobs, tx, app.deps.clock, recurring)));
      },
      drain: async () => runner?.drain(),
    } satisfies Jobs);
    if (runner === null) return;
    app.deps.signals.subscribe((signal) => {
      if (signal === 'due' || signal === 'elsewhere') runner.wake();
    });
    app.addHook('onReady', async () => runner.start());
    // preClose: attempts in flight finish and are recorded while the database is still open.
    app.addHook('preClose', async () => runner.stop(stopGraceMs));
  },
  { name: 'jobs', dependencies: ['core'] },
);
