import type { McpServer } from '@modelcontextprotocol/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { enforceToolCallLimit } from './mcp.limits.ts';

const SERVER_VERSION = '1.0.0';

type Sdk = typeof import('@modelcontextprotocol/server');
let loading: Promise<Sdk> | undefined;
/** The SDK, loaded at the first MCP request: some 30 MB of memory a service that serves none never holds. */
const sdk = (): Promise<Sdk> => (loading ??= import('@modelcontextprotocol/server'));

/**
 * Answers one MCP request over Streamable HTTP, statelessly, with the v2 SDK:
 * protocol revision 2026-07-28 (a request carrying its per-request envelope)
 * through its HTTP entry (`createMcpHandler`), the 2024-11-05 … 2025-11-25
 * revisions through a stateless transport, routed by the SDK's own
 * `isLegacyRequest`; one server factory, so both eras see the same tools.
 * JSON responses (the tools send nothing before their result, so no SSE stream). The SDK's handler is
 * web-standard (a fetch Request in, a Response out), so the reply stays
 * Fastify's own (hooks, metrics and the error handler keep working) instead
 * of being hijacked. Tool calls count against the caller's limit first.
 */
export async function serveMcp(
  request: FastifyRequest,
  reply: FastifyReply,
  serverName: string,
  registerTools: (server: McpServer) => void,
): Promise<FastifyReply> {
  const limited = await enforceToolCallLimit(request);
  if (limited !== null) {
    return reply.code(429).header('retry-after', String(limited.retryAfterSeconds)).type('application/json').send(JSON.stringify(limited.body));
  }
  const { createMcpHandler, isLegacyRequest, McpServer, WebStandardStreamableHTTPServerTransport } = await sdk();
  const createServer = () => {
    const server = new McpServer({ name: serverName, version: SERVER_VERSION }, { capabilities: { tools: {} } });
    registerTools(server);
    return server;
  };
  const url = new URL(request.url, `${request.protocol}://${request.host}`);
  const webRequest = new Request(url, { method: 'POST', headers: webHeaders(request) });
  const response = (await isLegacyRequest(webRequest, request.body))
    ? await serveLegacy(new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true }), webRequest, request.body, createServer())
    : // One JSON body unless a tool emits a message before its result (ours do not).
      await serveModern(createMcpHandler(createServer, { legacy: 'reject' }), webRequest, request.body);
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  const body = await response.text();
  return reply.send(body === '' ? undefined : body);
}

/** 2026-07-28: the SDK's per-request entry, modern revisions only (the legacy ones are routed to serveLegacy first). */
async function serveModern(handler: ReturnType<Sdk['createMcpHandler']>, webRequest: Request, body: unknown): Promise<Response> {
  try {
    return await handler.fetch(webRequest, { parsedBody: body });
  } finally {
    await handler.close();
  }
}

/**
 * 2024-11-05 … 2025-11-25: a stateless Streamable HTTP transport answering
 * JSON, as before (the SDK's own stateless fallback would answer with an SSE stream).
 */
async function serveLegacy(transport: InstanceType<Sdk['WebStandardStreamableHTTPServerTransport']>, webRequest: Request, body: unknown, server: McpServer): Promise<Response> {
  await server.connect(transport);
  try {
    return await transport.handleRequest(webRequest, { parsedBody: body });
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
