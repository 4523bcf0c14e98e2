export type RunSource = 'manual' | 'schedule' | 'webhook';

/** `pending` waits for an executor slot or its machine's boot; `succeeded` and `failed` are final. */
export const RUN_STATUSES = ['pending', 'running', 'succeeded', 'failed'] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

export interface RunsTable {
  id: string;
  account_id: string;
  machine_id: string;
  source: RunSource;
  /** The schedule or inbound webhook that caused the run; null for manual runs. */
  source_id: string | null;
  /** Its name when the run was made, for the stop reason `after schedule <name>`. */
  source_name: string | null;
  command: string;
  /** Absolute; null: the machine's home directory. */
  cwd: string | null;
  /** JSON object of the variables added to the machine's environment. */
  env: string;
  timeout_ms: number;
  stop_after: number;
  status: RunStatus;
  exit_code: number | null;
  /** stdout and stderr together, in the order they came; the failure's reason when the command never ran. */
  output: string | null;
  stdout: string | null;
  stderr: string | null;
  /** 1: some output was past the limit and is not kept. */
  truncated: number;
  /** 1: killed for its timeout. */
  timed_out: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
}

export interface SchedulesTable {
  id: string;
  account_id: string;
  machine_id: string;
  name: string;
  /** Five-field cron expression, evaluated in UTC. */
  cron: string;
  command: string;
  stop_after: number;
  /** The next tick, as its job has it scheduled. */
  next_run_at: number;
  last_run_at: number | null;
  created_at: number;
}

export interface InboundWebhooksTable {
  id: string;
  account_id: string;
  machine_id: string;
  name: string;
  command: string;
  stop_after: number;
  /** SHA-256 of the unguessable token in the webhook's URL. */
  token_hash: string;
  /** The signing secret itself: HMAC needs it, so it cannot be stored as a hash. */
  secret: string;
  last_triggered_at: number | null;
  created_at: number;
}

/** A signed inbound request already received: the same signature within the tolerance window is a replay. */
export interface InboundWebhookReceiptsTable {
  hook_id: string;
  /** The `v1` value that matched, which depends only on the timestamp and the body. */
  signature: string;
  run_id: string;
  /** When the signature falls out of the tolerance window; the row is pruned after. */
  expires_at: number;
}
