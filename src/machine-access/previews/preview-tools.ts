import type { McpServer } from '@modelcontextprotocol/server';
import { Type } from 'typebox';
import { IdParamsSchema } from '../../http/schemas.ts';
import type { PlatformToolRegistrar } from '../../mcp/mcp.plugin.ts';
import { defineTool } from '../../mcp/tools.ts';
import type { MachineToolContext } from '../machine-tools.ts';
import { createPreviewLink, previewOf, type Previews } from './previews.service.ts';
import { PreviewLinkBody } from './previews.schemas.ts';

// The tools take the HTTP route's body (previews.schemas.ts): its limits are written once.
const PlatformPreviewInput = Type.Object(
  { id: { ...IdParamsSchema.properties.id, description: 'Machine id (mch_…)' }, ...PreviewLinkBody.properties },
  { additionalProperties: false },
);

const DESCRIPTION =
  'The preview URL of a port of the machine (an HTTP server there, WebSockets included), and a signed link that opens it in a browser until expiresAt. ' +
  'Previews are private unless the owner made the port public: the plain url then needs the X-Preview-Token header; the signedUrl needs nothing.';

/** What both tools answer: the port's URL, whether it is public, and a signed link to it. */
async function previewAnswer(previews: Previews, accountId: string, machineId: string, port: number, expiresInSeconds: number | undefined) {
  const link = await createPreviewLink(previews, accountId, machineId, { port, expiresInSeconds });
  const preview = await previewOf(previews, machineId, port);
  return { port, url: preview.url, public: preview.public, signedUrl: link.url, expiresAt: link.expiresAt };
}

/** The machine's own MCP tool (where its provider serves previews). */
export function registerPreviewTools(server: McpServer, context: MachineToolContext, previews: Previews): void {
  defineTool(server, context.logger, 'preview_url', {
    description: DESCRIPTION,
    input: PreviewLinkBody,
  }, ({ port, expiresInSeconds }) => previewAnswer(previews, context.accountId, context.machineId, port, expiresInSeconds));
}

/** The platform MCP server's tool. */
export function previewPlatformTools(previews: Previews): PlatformToolRegistrar {
  return (server, { deps, accountId }) => {
    defineTool(server, deps.logger, 'machine_preview_url', {
      description: DESCRIPTION,
      input: PlatformPreviewInput,
    }, ({ id, port, expiresInSeconds }) => previewAnswer(previews, accountId, id, port, expiresInSeconds));
  };
}
