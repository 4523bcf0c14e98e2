/** The account as a response shows it; an API key carries its owner's, read with the key. */
export interface AccountView {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
  createdAt: string;
}

/** What `GET /api/me` tells of the account's second factors. */
export interface SecondFactorView {
  totp: boolean;
  passkeys: number;
  recoveryCodesLeft: number;
}

/** Who a request acts for: what an authenticator answers, and what routes and tools read. */
export type Principal =
  /** `authenticatedAt`: the sign-in or reauthentication, for what needs a recent one. */
  | { kind: 'session'; accountId: string; sessionId: string; authenticatedAt: number }
  | { kind: 'api_key'; accountId: string; apiKeyId: string; account: AccountView; secondFactor: SecondFactorView }
  | { kind: 'machine'; accountId: string; machineId: string }
  /** An OAuth access token (`tmo_`): one grant, i.e. one account's consent to one client; valid only on `/api/mcp`. */
  | { kind: 'oauth'; accountId: string; grantId: string; clientId: string };
