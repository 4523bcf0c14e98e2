export interface EventEndpointsTable {
  id: string;
  account_id: string;
  url: string;
  /** JSON array of event types, or ["*"]. */
  events: string;
  description: string;
  enabled: number;
  /** The signing secret itself: HMAC needs it, so unlike tokens it cannot be stored as a hash. */
  secret: string;
  created_at: number;
  updated_at: number;
  /** 'failing' when auto-disabled; null while enabled or paused by hand. */
  disabled_reason: string | null;
  disabled_at: number | null;
  /** The first failed attempt since the last success; null while it succeeds. */
  failing_since: number | null;
  /** When the owner was warned that it has been failing for a fifth of WEBHOOK_DISABLE_AFTER. */
  warned_at: number | null;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveriesTable {
  id: string;
  account_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  /** Attempts made, over every series (a manual retry starts a new series: a new job). */
  attempts: number;
  /** When the next attempt is due, while pending (its job holds the schedule; this is the record of it). */
  next_attempt_at: number | null;
  last_status: number | null;
  last_body: string | null;
  last_error: string | null;
  last_duration_ms: number | null;
  last_attempt_at: number | null;
  created_at: number;
  /** 1 while a recovered or replayed delivery waits for the feeder to hand it to its lane, else null (no attempt ever changes it). */
  unqueued: number | null;
}

/** One attempt of a delivery, as the attempt log keeps it. */
export interface DeliveryAttemptsTable {
  delivery_id: string;
  /** 1 for the delivery's first attempt ever. */
  n: number;
  endpoint_id: string;
  at: number;
  ok: number;
  status: number | null;
  duration_ms: number;
  error: string | null;
  /** At most the first 1,024 bytes of the answer. */
  body: string | null;
}
