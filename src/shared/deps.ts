import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../config.ts';
import type { DB } from '../db/database.ts';
import type { Mailer } from '../mail/mailer.ts';
import type { BackgroundTasks } from './background.ts';
import type { Clock } from './clock.ts';
import type { DeliveryWorker } from '../event-webhooks/delivery.worker.ts';
import type { DeliveryMetrics } from '../event-webhooks/delivery.metrics.ts';
import type { Sender } from '../event-webhooks/sender.ts';
import type { Signals } from './signals.ts';
import type { ApiKeyCache } from '../api-keys/api-key-cache.ts';

/** What services need from the outside world; built once in app.ts. */
export interface Deps {
  config: Readonly<Config>;
  db: Kysely<DB>;
  clock: Clock;
  mailer: Mailer;
  background: BackgroundTasks;
  logger: FastifyBaseLogger;
  webhooks: {
    sender: Sender;
    metrics: DeliveryMetrics;
    /** This process's delivery worker, when its ROLE runs one. */
    worker: DeliveryWorker | null;
  };
  signals: Signals;
  apiKeyCache: ApiKeyCache;
  /** Changes whenever another process has committed to a shared SQLite file (see otherProcessesCommits). */
  otherProcessesCommits: () => number;
}
