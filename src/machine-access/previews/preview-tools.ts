import type { McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod';
import type { PlatformToolRegistrar } from '../../mcp/mcp.plugin.ts';
import { defineTool } from '../../mcp/tools.ts';
import type { MachineToolContext } from '../machine-tools.ts';
import { createPreviewLink, PREVIEW_LINK_SECONDS, previewOf, type Previews } from './previews.service.ts';

const PreviewArgs = {
  port: z.number().int().min(1).max(65_535).describe('The TCP port a server listens on inside the machine (on 127.0.0.1 or 0.0.0.0)'),
  expiresInSeconds: z
    .number()
    .int()
    .min(PREVIEW_LINK_SECONDS.min)
    .max(PREVIEW_LINK_SECONDS.max)
    .optional()
    .describe(`How long the signed link works (default ${PREVIEW_LINK_SECONDS.default})`),
};

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
    input: z.strictObject(PreviewArgs),
  }, ({ port, expiresInSeconds }) => previewAnswer(previews, context.accountId, context.machineId, port, expiresInSeconds));
}

/** The platform MCP server's tool. */
export function previewPlatformTools(previews: Previews): PlatformToolRegistrar {
  return (server, { deps, accountId }) => {
    defineTool(server, deps.logger, 'machine_preview_url', {
      description: DESCRIPTION,
      input: z.strictObject({ id: z.string().min(1).max(100).describe('Machine id (mch_…)'), ...PreviewArgs }),
    }, ({ id, port, expiresInSeconds }) => previewAnswer(previews, accountId, id, port, expiresInSeconds));
  };
}
