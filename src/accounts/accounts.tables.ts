export interface AccountsTable {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  email_verified_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface SessionsTable {
  id: string;
  account_id: string;
  token_hash: string;
  user_agent: string | null;
  ip: string | null;
  created_at: number;
  last_seen_at: number;
}

export type EmailTokenPurpose = 'verify_email' | 'reset_password';

export interface EmailTokensTable {
  token_hash: string;
  account_id: string;
  purpose: EmailTokenPurpose;
  expires_at: number;
  used_at: number | null;
  created_at: number;
}
