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
  /** When the holder last proved who they are (sign-in, reauthentication); null: at created_at. */
  authenticated_at: number | null;
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

export interface TotpFactorsTable {
  account_id: string;
  secret: string;
  /** Null while enrolment waits for its first code. */
  confirmed_at: number | null;
  /** The 30-second step of the last code accepted: a code of that step or earlier is refused (no replay). */
  last_used_step: number | null;
  created_at: number;
}

export interface RecoveryCodesTable {
  account_id: string;
  code_hash: string;
  used_at: number | null;
  created_at: number;
}

export interface PasskeysTable {
  id: string;
  account_id: string;
  /** base64url, as WebAuthn responses carry it. */
  credential_id: string;
  /** COSE public key, base64url. */
  public_key: string;
  counter: number;
  /** JSON array of transport hints. */
  transports: string;
  name: string;
  created_at: number;
  last_used_at: number | null;
}

export interface WebauthnChallengesTable {
  /** What the challenge is bound to: `register:<session id>` or `second-factor:<pending token hash>` (a passwordless sign-in's rides in its cookie instead). */
  binding: string;
  challenge: string;
  expires_at: number;
}

export interface PendingSignInsTable {
  token_hash: string;
  account_id: string;
  created_at: number;
  expires_at: number;
}

/** A key for signing what the service hands a browser to keep (the passwordless sign-in's challenge cookie); made on first use. */
export interface SigningKeysTable {
  name: string;
  /** 32 random bytes, base64url. */
  secret: string;
  created_at: number;
}

/** A passwordless sign-in's challenge, once a sign-in has used it: it never works again while its cookie could. */
export interface SpentChallengesTable {
  /** SHA-256 of the challenge, hex. */
  challenge_hash: string;
  /** When the cookie that carried it expired: then the row can go. */
  expires_at: number;
}
