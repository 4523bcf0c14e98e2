import type { McpServer } from '@modelcontextprotocol/server';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import type { Principal } from '../http/principal.ts';
import type { Deps } from '../deps.ts';
import { methodNotAllowed, serveMcp } from './mcp.http.ts';

export interface PlatformToolContext {
  deps: Deps;
  /** The account the caller acts for. */
  accountId: string;
  principal: Principal;
}

/** A domain's contribution to the platform MCP server: registers its tools for one request's caller. */
export type PlatformToolRegistrar = (server: McpServer, context: PlatformToolContext) => void;

declare module 'fastify' {
  interface FastifyInstance {
    /** Domains push their registrars here (machines, event webhooks); each request's server gets them all. */
    platformMcpTools: PlatformToolRegistrar[];
  }
}

const JsonRpcBody = Type.Unknown({ description: 'A JSON-RPC message or batch (MCP Streamable HTTP)' });
const tags = ['mcp'];

/** `POST /api/mcp`: the platform MCP server, for API keys and OAuth access tokens (machine tokens are refused by the auth hook). */
export const mcpPlugin = fp(
  async (app) => {
    app.decorate('platformMcpTools', [] as PlatformToolRegistrar[]);
    if (app.deps.config.role === 'worker') return;

    // RFC 9728 / MCP authorization: every 401 names the protected resource metadata, where OAuth clients start.
    const challenge = `Bearer resource_metadata="${app.deps.config.publicUrl}/.well-known/oauth-protected-resource/api/mcp"`;
    app.post('/api/mcp', {
      config: { auth: 'mcp', mcpTransport: true },
      onSend: async (_request, reply, payload) => {
        if (reply.statusCode === 401) {
          const error = /error="invalid_token"/.test(String(reply.getHeader('www-authenticate') ?? '')) ? ', error="invalid_token"' : '';
          reply.header('www-authenticate', `${challenge}${error}`);
        }
        return payload;
      },
      schema: { tags, summary: 'Platform MCP server (Streamable HTTP, stateless); Bearer API key or OAuth access token', body: JsonRpcBody },
    }, async (request, reply) => {
      const context: PlatformToolContext = { deps: app.deps, accountId: accountIdOf(request), principal: request.principal! };
      return serveMcp(request, reply, 'machine-platform', (server) => {
        for (const register of app.platformMcpTools) register(server, context);
      });
    });

    for (const method of ['GET', 'DELETE'] as const) {
      app.route({
        method,
        url: '/api/mcp',
        config: { auth: 'none', mcpTransport: true },
        schema: { hide: true },
        handler: async (_request, reply) => methodNotAllowed(reply),
      });
    }
  },
  { name: 'mcp', dependencies: ['core', 'auth'] },
);
