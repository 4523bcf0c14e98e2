import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { IdParamsSchema } from '../http/schemas.ts';
import { methodNotAllowed, serveMcp } from '../mcp/mcp.http.ts';
import type { ToolWaitOptions } from '../mcp/tools.ts';
import { registerMachineTools, type MachineToolContext } from './machine-tools.ts';
import type { McpServer } from '@modelcontextprotocol/server';
import { runForMachineCaller } from '../runs/runs.service.ts';
import { wrongStatus } from '../machines/machines.errors.ts';
import { toMachineView } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';

const tags = ['mcp'];

/** `POST /api/machines/{id}/mcp`: the machine's own MCP server, with its provider's tools (machine token or the owner's API key). */
export const machineMcpRoutes: FastifyPluginAsyncTypebox<{
  toolWait: Readonly<ToolWaitOptions>;
  /** Tools of other parts of the machine (previews), registered after the provider's. */
  moreTools?: ReadonlyArray<(server: McpServer, context: MachineToolContext) => void>;
}> = async (app, { toolWait, moreTools = [] }) => {
  const { deps, machineProvider: provider } = app;

  app.post('/api/machines/:id/mcp', {
    config: { auth: 'machine', mcpTransport: true },
    schema: {
      tags,
      summary: "The machine's MCP server (Streamable HTTP, stateless): machine token or API key",
      params: IdParamsSchema,
      body: Type.Unknown({ description: 'A JSON-RPC message or batch' }),
    },
  }, async (request, reply) => {
    const accountId = accountIdOf(request);
    const caller = { accountId, viaMachineToken: request.principal?.kind === 'machine' };
    const machineId = request.params.id;
    const machine = await getMachineRow(deps, accountId, machineId);
    if (machine.status === 'destroyed') throw wrongStatus('serve MCP', machine.status);
    return serveMcp(request, reply, `machine ${machine.name}`, (server) => {
      const context: MachineToolContext = {
        deps,
        accountId,
        machineId,
        logger: app.deps.logger,
        wait: toolWait,
        describe: async () => toMachineView(await getMachineRow(deps, accountId, machineId)),
        runCommand: (run, wait) => runForMachineCaller(deps, provider, caller, machineId, run, wait),
      };
      registerMachineTools(server, context, provider);
      for (const register of moreTools) register(server, context);
    });
  });

  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/api/machines/:id/mcp',
      config: { auth: 'none', mcpTransport: true },
      schema: { hide: true },
      handler: async (_request, reply) => methodNotAllowed(reply),
    });
  }
};
