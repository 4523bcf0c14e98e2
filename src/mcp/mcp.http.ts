import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { FastifyReply, FastifyRequest } from 'fastify';

const SERVER_VERSION = '1.0.0';

/**
 * Answers one MCP request over Streamable HTTP, statelessly: a fresh server
 * and transport per POST, tools registered for the caller, JSON responses
 * (no SSE stream). The SDK's web-standard transport takes a fetch Request and
 * gives a Response, so the reply stays Fastify's own (hooks, metrics and the
 * error handler keep working) instead of being hijacked.
 */
export async function serveMcp(
  request: FastifyRequest,
  reply: FastifyReply,
  serverName: string,
  registerTools: (server: McpServer) => void,
): Promise<FastifyReply> {
  const server = new McpServer({ name: serverName, version: SERVER_VERSION }, { capabilities: { tools: {} } });
  registerTools(server);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    const url = new URL(request.url, `${request.protocol}://${request.host}`);
    const response = await transport.handleRequest(new Request(url, { method: 'POST', headers: webHeaders(request) }), {
      parsedBody: request.body,
    });
    reply.code(response.status);
    response.headers.forEach((value, name) => {
      reply.header(name, value);
    });
    const body = await response.text();
    return reply.send(body === '' ? undefined : body);
  } finally {
    await server.close();
  }
}

/** Credentials stay behind (the caller is already authenticated), as do hop-by-hop headers. */
const DROPPED_HEADERS = new Set(['authorization', 'cookie', 'host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);

function webHeaders(request: FastifyRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || DROPPED_HEADERS.has(name)) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return headers;
}

/** Streamable HTTP servers without an SSE stream answer GET (and, stateless, DELETE) with 405. */
export function methodNotAllowed(reply: FastifyReply): FastifyReply {
  return reply
    .code(405)
    .header('allow', 'POST')
    .type('application/json')
    .send(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: send JSON-RPC messages with POST.' }, id: null }));
}
