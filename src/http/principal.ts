/** The account as a response shows it; an API key carries its owner's, read with the key. */
export interface AccountView {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
  createdAt: string;
}

/** Who a request acts for: what an authenticator answers, and what routes and tools read. */
export type Principal =
  | { kind: 'session'; accountId: string; sessionId: string }
  | { kind: 'api_key'; accountId: string; apiKeyId: string; account: AccountView }
  | { kind: 'machine'; accountId: string; machineId: string }
  /** An OAuth access token (`tmo_`): one grant, i.e. one account's consent to one client; valid only on `/api/mcp`. */
  | { kind: 'oauth'; accountId: string; grantId: string; clientId: string };
