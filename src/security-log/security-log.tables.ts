export interface SecurityLogTable {
  id: string;
  account_id: string;
  type: string;
  at: number;
  ip: string | null;
  user_agent: string | null;
  /** JSON object of strings: names and ids, never a secret, code or token. */
  detail: string | null;
}
