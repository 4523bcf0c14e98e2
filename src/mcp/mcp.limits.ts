import type { FastifyRequest } from 'fastify';
import type { Principal } from '../http/principal.ts';
import { hit } from '../rate-limits/rate-limiter.ts';
import { MINUTE } from '../shared/clock.ts';

/** The spec's tools section: servers MUST rate-limit tool invocations. One counter per credential; an OAuth grant's tokens share one. */
function credentialKey(principal: Principal): string {
  switch (principal.kind) {
    case 'api_key':
      return `key:${principal.apiKeyId}`;
    case 'oauth':
      return `grant:${principal.grantId}`;
    case 'machine':
      return `machine:${principal.machineId}`;
    case 'session':
      return `session:${principal.sessionId}`;
  }
}

type RequestId = string | number | null;

/** The ids of the `tools/call` requests in a JSON-RPC message or batch (none for anything else). */
function toolCallIds(body: unknown): RequestId[] {
  const messages = Array.isArray(body) ? body : [body];
  const ids: RequestId[] = [];
  for (const message of messages) {
    if (typeof message !== 'object' || message === null) continue;
    const { method, id } = message as { method?: unknown; id?: unknown };
    if (method === 'tools/call') ids.push(typeof id === 'string' || typeof id === 'number' ? id : null);
  }
  return ids;
}

export interface LimitedAnswer {
  retryAfterSeconds: number;
  /** A JSON-RPC error per refused call, each with its request's id. */
  body: unknown;
}

/**
 * Counts the request's tool calls against `MCP_TOOL_CALLS_PER_MINUTE` (fixed
 * one-minute windows in the database, so every process shares them). Other
 * methods (initialize, tools/list) are not counted.
 * @returns null when within the limit, else the answer to send with HTTP 429.
 */
export async function enforceToolCallLimit(request: FastifyRequest): Promise<LimitedAnswer | null> {
  const { config, db, clock } = request.server.deps;
  const principal = request.principal;
  if (!config.rateLimit || principal === null) return null;
  const ids = toolCallIds(request.body);
  if (ids.length === 0) return null;
  const limit = { max: config.mcp.toolCallsPerMinute, windowMs: MINUTE };
  let retryAfterSeconds = 0;
  for (let i = 0; i < ids.length; i++) {
    const result = await hit(db, { key: `mcp-tool-calls:${credentialKey(principal)}`, limit }, clock.now());
    if (!result.allowed) retryAfterSeconds = Math.max(retryAfterSeconds, result.retryAfterSeconds);
  }
  if (retryAfterSeconds === 0) return null;
  const message = `Too many tool calls: at most ${limit.max} a minute per credential. Try again in ${retryAfterSeconds} seconds.`;
  const errors = ids.map((id) => ({ jsonrpc: '2.0', id, error: { code: -32000, message, data: { retryAfterSeconds } } }));
  return { retryAfterSeconds, body: Array.isArray(request.body) ? errors : errors[0] };
}
