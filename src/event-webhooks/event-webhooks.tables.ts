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
}
