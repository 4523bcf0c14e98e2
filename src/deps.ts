import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from './config.ts';
import type { Database } from './db/connect.ts';
import type { DB } from './db/database.ts';
import type { Queue } from './jobs/queue.ts';
import type { Clock } from './shared/clock.ts';
import type { Signals } from './db/signals.ts';
import type { Sealer } from './shared/sealing.ts';
import type { MachineFollower } from './machines/machine-follower.ts';

/**
 * What every domain's services take first: the base services, built once in
 * app.ts and never changed. Anything a single domain needs (a sender, a
 * cache, a provider) is that domain's own, built in its plugin.
 */
export interface Deps {
  readonly config: Readonly<Config>;
  /** The connection and its engine, what inTransaction takes; `db` is its Kysely instance, for plain queries. */
  readonly database: Database;
  readonly db: Kysely<DB>;
  readonly clock: Clock;
  readonly logger: FastifyBaseLogger;
  readonly signals: Signals;
  /** Background work, enqueued inside the transaction of the change that calls for it. */
  readonly jobs: Queue;
  /** Encryption at rest of users' secrets (SECRETS_KEY). */
  readonly secrets: Sealer;
  /** What runs/ and machine-access/ change in the transaction of a machine's change of state (machine-transitions.ts). */
  readonly machineFollowers: readonly MachineFollower<Deps>[];
}
