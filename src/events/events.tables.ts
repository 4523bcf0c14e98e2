export interface EventsTable {
  id: string;
  account_id: string;
  type: string;
  /** The envelope exactly as delivered, serialised once so every redelivery sends the same bytes. */
  payload: string;
  /** The machine the event is about (its `data.machine.id`), so a machine's events are one index walk; null for others. */
  machine_id: string | null;
  created_at: number;
}
