export interface RateLimitsTable {
  key: string;
  window_started_at: number;
  hits: number;
}
