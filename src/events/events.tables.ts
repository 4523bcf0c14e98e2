export interface EventsTable {
  id: string;
  account_id: string;
  type: string;
  /** The envelope exactly as delivered, serialised once so every redelivery sends the same bytes. */
  payload: string;
  created_at: number;
}
