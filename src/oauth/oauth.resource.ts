/* What the rest of the service needs to know of the authorization server, without loading it (oidc-provider loads at the first OAuth request). */

/** The dashboard page that asks for consent (signing in first if needed). */
export const CONSENT_PAGE = '/oauth/consent';

/** The one scope: the platform MCP server's tools. */
export const MCP_SCOPE = 'mcp';

export const ACCESS_TOKEN_TTL_S = 3600;
export const GRANT_TTL_S = 365 * 24 * 3600;

/** The protected resource: the platform MCP endpoint (RFC 8707 resource indicator, RFC 9728 resource). */
export const mcpResource = (publicUrl: string) => `${publicUrl}/api/mcp`;
