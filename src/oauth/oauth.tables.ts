/** The authorization server's storage (oidc-provider models), keyed by the SHA-256 of each id. */
export interface OAuthRecordsTable {
  kind: string;
  id_hash: string;
  /** The model's JSON payload. */
  payload: string;
  grant_id: string | null;
  uid: string | null;
  expires_at: number | null;
  consumed_at: number | null;
}

/** One consent of one account to one client: what the dashboard lists and revokes. */
export interface OAuthGrantsTable {
  id: string;
  account_id: string;
  client_id: string;
  client_name: string;
  redirect_host: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number;
}
