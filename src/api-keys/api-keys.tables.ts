export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  token_hash: string;
  created_at: number;
  last_used_at: number | null;
}
