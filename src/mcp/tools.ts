import type { McpServer } from '@modelcontextprotocol/server';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import type * as z from 'zod';
import { AppError } from '../http/errors.ts';

export interface ToolDefinition<S extends z.ZodObject> {
  description: string;
  /** Strict (`z.strictObject`), like HTTP bodies: unknown fields are refused. */
  input: S;
  annotations?: ToolAnnotations;
}

/** The same JSON as the HTTP answer, as structured content and as text. */
export function toolResult(value: object): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> };
}

/**
 * An MCP tool error (a result with `isError`), never a crash: an AppError
 * keeps its code and detail, as the HTTP problem would; anything else is
 * logged and reported without internals.
 */
export function toolError(error: unknown, logger: FastifyBaseLogger, tool: string): CallToolResult {
  if (error instanceof AppError) {
    const problem = { status: error.status, code: error.code, detail: error.message };
    return { isError: true, content: [{ type: 'text', text: `${error.code}: ${error.message}` }], structuredContent: { error: problem } };
  }
  logger.error({ err: error, tool }, 'MCP tool failed');
  const problem = { status: 500, code: 'internal_error', detail: 'Something went wrong on our side. The error has been logged.' };
  return { isError: true, content: [{ type: 'text', text: `${problem.code}: ${problem.detail}` }], structuredContent: { error: problem } };
}

/** A picture (a screenshot) as MCP image content, with what describes it as structured content. */
export function imageResult(image: { body: Buffer; contentType: string }, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'image', data: image.body.toString('base64'), mimeType: image.contentType }], structuredContent: structured };
}

/** Registers a tool whose handler returns the HTTP API's JSON, or throws an AppError. */
export function defineTool<S extends z.ZodObject>(
  server: McpServer,
  logger: FastifyBaseLogger,
  name: string,
  definition: ToolDefinition<S>,
  handle: (args: z.output<S>) => Promise<object>,
): void {
  defineContentTool(server, logger, name, definition, async (args) => toolResult(await handle(args)));
}

/** Registers a tool whose handler answers its own result (an image, say), or throws an AppError. */
export function defineContentTool<S extends z.ZodObject>(
  server: McpServer,
  logger: FastifyBaseLogger,
  name: string,
  definition: ToolDefinition<S>,
  handle: (args: z.output<S>) => Promise<CallToolResult>,
): void {
  const input: z.ZodObject = definition.input;
  server.registerTool(
    name,
    { description: definition.description, inputSchema: input, ...(definition.annotations ? { annotations: definition.annotations } : {}) },
    async (args: unknown) => {
      try {
        // The SDK has validated args against `input` before calling.
        return await handle(args as z.output<S>);
      } catch (error) {
        return toolError(error, logger, name);
      }
    },
  );
}
