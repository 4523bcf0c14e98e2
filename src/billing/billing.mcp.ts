import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool, NoInput } from '../mcp/tools.ts';
import { getBilling } from './billing.service.ts';

/** The platform MCP server's billing tool: what GET /api/billing answers. */
export function billingPlatformTools(): PlatformToolRegistrar {
  return (server, { deps, accountId }) => {
    defineTool(server, deps.logger, 'billing_get', {
      description: 'The account’s balance (USD, six decimals), prices per hour by machine size, saved card (brand, last4, expiry) and welcome-credit status.',
      input: NoInput,
      annotations: { readOnlyHint: true },
    }, async () => getBilling(deps, accountId));
  };
}
