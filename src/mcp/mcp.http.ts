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
 * A JSON response, unless a tool sends messages before its result (progress
 * notifications, to a client that asked for them with `_meta.progressToken`):
 * then an SSE stream of them and the result. The SDK's handler is
 * web-standard (a fetch Request in, a Response out), so the reply stays
 * Fastify's own (hooks, metrics and the error handler keep working) instead
 * of being hijacked. A client that goes away ends the exchange, and with it
 * whatever a tool waits for. Tool calls count against the caller's limit first.
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
  // The response closes before it has ended: the client went away (closed its connection, or gave up).
  const gone = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.once('close', onClose);
  const url = new URL(request.url, `${request.protocol}://${request.host}`);
  const webRequest = new Request(url, { method: 'POST', headers: webHeaders(request), signal: gone.signal });
  const exchange = (await isLegacyRequest(webRequest, request.body))
    ? legacyExchange(WebStandardStreamableHTTPServerTransport, createServer(), webRequest, request.body)
    : modernExchange(createMcpHandler(createServer, { legacy: 'reject' }), webRequest, request.body);
  gone.signal.addEventListener('abort', () => void exchange.close(), { once: true });
  let response: Response | null;
  try {
    response = await Promise.race([exchange.response, whenAborted(gone.signal)]);
  } catch (error) {
    await exchange.close();
    throw error;
  }
  // 499, as proxies log a request whose client closed it: nobody reads this answer.
  if (response === null) return reply.code(499).send();
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  if (response.body !== null && response.headers.get('content-type')?.startsWith('text/event-stream')) {
    // The stream carries the tool's notifications, then its result: the exchange lasts as long as the stream does.
    reply.raw.once('close', () => void exchange.close());
    return reply.send(response.body);
  }
  let body: string;
  try {
    body = await response.text();
  } finally {
    reply.raw.off('close', onClose);
    await exchange.close();
  }
  return reply.send(body === '' ? undefined : body);
}

/** One request's exchange with a server: its response, and how to end it (at once, or once its stream has ended). */
interface Exchange {
  response: Promise<Response>;
  /** Idempotent; aborts what the tools still wait for. */
  close(): Promise<void>;
}

function once(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= close());
}

/** Resolves null when the signal aborts (never otherwise). */
function whenAborted(signal: AbortSignal): Promise<null> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(null), { once: true }));
}

/** 2026-07-28: the SDK's per-request entry, modern revisions only (the legacy ones are routed to legacyExchange first). */
function modernExchange(handler: ReturnType<Sdk['createMcpHandler']>, webRequest: Request, body: unknown): Exchange {
  return { response: handler.fetch(webRequest, { parsedBody: body }), close: once(() => handler.close()) };
}

/**
 * 2024-11-05 … 2025-11-25: a stateless Streamable HTTP transport answering
 * JSON (the SDK's own stateless fallback would always answer with an SSE stream),
 * or SSE for a request that asks for progress, the one way its notifications can reach the client.
 */
function legacyExchange(Transport: Sdk['WebStandardStreamableHTTPServerTransport'], server: McpServer, webRequest: Request, body: unknown): Exchange {
  const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: !asksForProgress(body) });
  return {
    response: server.connect(transport).then(() => transport.handleRequest(webRequest, { parsedBody: body })),
    close: once(() => server.close()),
  };
}

/** Whether a JSON-RPC message (or one of a batch) is a request carrying `_meta.progressToken`. */
function asksForProgress(body: unknown): boolean {
  return (Array.isArray(body) ? body : [body]).some((message) => {
    if (typeof message !== 'object' || message === null) return false;
    const meta = (message as { params?: { _meta?: { progressToken?: unknown } } }).params?._meta;
    return typeof meta === 'object' && meta !== null && meta.progressToken !== undefined;
  });
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
