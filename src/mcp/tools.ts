import type { McpServer, ServerContext, StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/server';
import type { Ajv, ErrorObject } from 'ajv';
import type { FastifyBaseLogger } from 'fastify';
import { Type, type Static, type TObject } from 'typebox';
import { AppError } from '../http/errors.ts';
import { createBodyAjv } from '../http/validation.ts';

/**
 * A tool that waits (for a run, say) answers within this: the official SDK client gives up on a request
 * after 60 s by default (`-32001 Request timed out`), and its error says nothing of what went on.
 */
export const TOOL_ANSWER_DEADLINE_MS = 50_000;

/** How often a waiting tool tells a client that asked for progress (`_meta.progressToken`) that it is still at work. */
export const TOOL_PROGRESS_INTERVAL_MS = 5_000;

/** How long tools wait and how often they report it; tests shorten both. */
export interface ToolWaitOptions {
  answerDeadlineMs: number;
  progressIntervalMs: number;
}

export const DEFAULT_TOOL_WAIT: Readonly<ToolWaitOptions> = Object.freeze({
  answerDeadlineMs: TOOL_ANSWER_DEADLINE_MS,
  progressIntervalMs: TOOL_PROGRESS_INTERVAL_MS,
});

/** What a tool's handler knows of its call besides its arguments. */
export interface ToolCall {
  /** Aborted when the client goes away (its connection closed) or cancels: whatever the tool waits for, it stops waiting. */
  signal: AbortSignal;
  /** Sends `notifications/progress` for this call; absent when the client did not ask for progress. */
  progress?: (progress: number, message: string) => Promise<void>;
}

/**
 * Waits for `work`, telling the client every `intervalMs` that it is still waiting when it asked for
 * progress; the timer ends with the work (or with the call).
 */
export async function withProgress<T>(call: ToolCall, intervalMs: number, work: Promise<T>): Promise<T> {
  const { progress } = call;
  if (progress === undefined) return work;
  const started = performance.now();
  const timer = setInterval(() => {
    const seconds = Math.round((performance.now() - started) / 100) / 10;
    // A notification that cannot be sent (the client went away) changes nothing: the wait ends with the call.
    progress(seconds, `Still waiting after ${seconds} s`).catch(() => {});
  }, intervalMs);
  const stop = () => clearInterval(timer);
  call.signal.addEventListener('abort', stop, { once: true });
  try {
    return await work;
  } finally {
    stop();
    call.signal.removeEventListener('abort', stop);
  }
}

export interface ToolDefinition<S extends TObject> {
  description: string;
  /**
   * A TypeBox object with `additionalProperties: false`, like HTTP bodies: unknown fields are refused. Where the
   * HTTP API takes the same input, this is built from the route's schema (its object, or its properties), never
   * written again: a tool and its route cannot disagree on a limit. Built once (at module load, or when a
   * registrar is made), not per request: its validator is compiled once per schema object.
   */
  input: S;
  annotations?: ToolAnnotations;
}

/** The input of a tool that takes no arguments. */
export const NoInput = Type.Object({}, { additionalProperties: false });

let ajv: Ajv | undefined;
const toolInputs = new WeakMap<TObject, StandardSchemaWithJSON>();

/**
 * A tool's input as the MCP SDK takes it (a Standard Schema with its JSON Schema): the TypeBox schema, which is
 * JSON Schema, advertised as it is in tools/list, and checked by the validator of HTTP bodies (same options,
 * same formats), so a tool answers `Input validation error: …` for what its route answers 400 for.
 */
export function toolInput<S extends TObject>(schema: S): StandardSchemaWithJSON<Static<S>> {
  const known = toolInputs.get(schema);
  if (known !== undefined) return known as StandardSchemaWithJSON<Static<S>>;
  ajv ??= createBodyAjv();
  const validate = ajv.compile(schema);
  // The compiled function is ours to keep; Ajv's own cache would hold every schema it ever saw.
  ajv.removeSchema(schema);
  // Plain JSON (TypeBox's markers are not enumerable), copied once: what tools/list shows is not the route's object.
  const json = { $schema: 'https://json-schema.org/draft/2020-12/schema', ...(JSON.parse(JSON.stringify(schema)) as Record<string, unknown>) };
  const input: StandardSchemaWithJSON<Static<S>> = {
    '~standard': {
      version: 1,
      vendor: 'typebox',
      jsonSchema: { input: () => json, output: () => json },
      validate: (value) => (validate(value) ? { value: value as Static<S> } : { issues: (validate.errors ?? []).map(issueOf) }),
    },
  };
  toolInputs.set(schema, input);
  return input;
}

/** An Ajv error as a Standard Schema issue: the SDK writes it `path: message`, as Fastify writes `body/path message`. */
function issueOf(error: ErrorObject): { message: string; path: string[] } {
  const path = error.instancePath.split('/').slice(1).map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
  const extra = error.keyword === 'additionalProperties' ? ` (${String(error.params.additionalProperty)})` : '';
  return { message: `${error.message ?? 'is not valid'}${extra}`, path };
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
export function defineTool<S extends TObject>(
  server: McpServer,
  logger: FastifyBaseLogger,
  name: string,
  definition: ToolDefinition<S>,
  handle: (args: Static<S>, call: ToolCall) => Promise<object>,
): void {
  defineContentTool(server, logger, name, definition, async (args, call) => toolResult(await handle(args, call)));
}

/** Registers a tool whose handler answers its own result (an image, say), or throws an AppError. */
export function defineContentTool<S extends TObject>(
  server: McpServer,
  logger: FastifyBaseLogger,
  name: string,
  definition: ToolDefinition<S>,
  handle: (args: Static<S>, call: ToolCall) => Promise<CallToolResult>,
): void {
  const input: StandardSchemaWithJSON = toolInput(definition.input);
  server.registerTool(
    name,
    { description: definition.description, inputSchema: input, ...(definition.annotations ? { annotations: definition.annotations } : {}) },
    async (args: unknown, context: ServerContext) => {
      try {
        // The SDK has validated args against `input` before calling.
        return await handle(args as Static<S>, toolCallOf(context));
      } catch (error) {
        return toolError(error, logger, name);
      }
    },
  );
}

function toolCallOf(context: ServerContext): ToolCall {
  const { signal, notify } = context.mcpReq;
  const progressToken = context.mcpReq._meta?.progressToken;
  if (progressToken === undefined) return { signal };
  return { signal, progress: (progress, message) => notify({ method: 'notifications/progress', params: { progressToken, progress, message } }) };
}
