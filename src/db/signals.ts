import { sql } from 'kysely';
import { dialectOf } from './connect.ts';
import type { Tx } from './transaction.ts';

/**
 * Signals between processes: `due` (jobs wait for any runner), `elsewhere`
 * (another process committed to a shared SQLite file: anything may have
 * changed), `endpoint:<id>` (an endpoint's url, secret or state changed),
 * `api-key:<id>` (a key was revoked), `account:<id>` (what an account shows
 * changed), `run:<id>` (a run finished). This process hears them after
 * commit; on PostgreSQL every other process hears them through NOTIFY, which
 * the database delivers only on commit too.
 */
export type Signal = 'due' | 'elsewhere' | `endpoint:${string}` | `api-key:${string}` | `account:${string}` | `run:${string}`;

export interface Signals {
  /** PostgreSQL NOTIFY channel, per schema so that deployments (or test runs) sharing a server do not cross-talk. */
  readonly channel: string;
  /** Answers the unsubscribe. */
  subscribe(listener: (signal: Signal) => void): () => void;
  /** Hands a signal to this process's subscribers. */
  hear(signal: Signal): void;
}

export function createSignals(schema: string | undefined): Signals {
  const listeners: Array<(signal: Signal) => void> = [];
  return {
    channel: schema ? `signals_${schema}` : 'signals',
    subscribe(listener) {
      listeners.push(listener);
      return () => {
        const index = listeners.indexOf(listener);
        if (index >= 0) listeners.splice(index, 1);
      };
    },
    hear: (signal) => listeners.forEach((listener) => listener(signal)),
  };
}

/** Announces a signal as part of a transaction: heard only if it commits. */
export async function announce(signals: Signals, tx: Tx, signal: Signal): Promise<void> {
  if (dialectOf(tx.db) === 'postgres') await sql`select pg_notify(${signals.channel}, ${signal})`.execute(tx.db);
  tx.afterCommit(() => signals.hear(signal));
}
