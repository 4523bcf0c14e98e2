import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { McpServer } from '@modelcontextprotocol/server';
import { billingPlatformTools } from '../../src/billing/billing.mcp.ts';
import { eventWebhookTools } from '../../src/event-webhooks/event-webhooks.mcp.ts';
import { registerMachineTools, type MachineToolContext } from '../../src/machine-access/machine-tools.ts';
import { machinePlatformTools } from '../../src/machine-access/machines.mcp.ts';
import { previewPlatformTools, registerPreviewTools } from '../../src/machine-access/previews/preview-tools.ts';
import type { PlatformToolContext } from '../../src/mcp/mcp.plugin.ts';
import { DEFAULT_TOOL_WAIT } from '../../src/mcp/tools.ts';
import type { Previews } from '../../src/machine-access/previews/previews.service.ts';
import type { TestSending } from '../../src/event-webhooks/deliveries.service.ts';
import type { MachineProvider } from '../../src/providers/provider.ts';
import { asBearer, type TestContext } from '../support/app.ts';
import { createMachineTestApp, newOwner } from '../support/machines.ts';

/**
 * Issue 42: every tool's input is its HTTP route's TypeBox schema, or built from that schema's fields, so the two
 * cannot disagree by construction. This pins it: for each tool with an HTTP twin, every field it shares with the
 * route (body, query string or path) has the same limits in the tool's advertised inputSchema as in the OpenAPI
 * document, and the same fields are required. A limit written a second time, by hand, would show here.
 */

type Schema = Record<string, unknown> & { properties?: Record<string, Schema>; required?: string[] };

interface Twin {
  method: string;
  path: string;
  /** Tool fields taken from the route's path parameters: tool field → parameter. */
  params?: Record<string, string>;
  /** Tool fields the route does not have (what only a tool can say, such as file_read's encoding). */
  toolOnly?: string[];
}

const TWINS: Record<string, Twin> = {
  machines_list: { method: 'get', path: '/api/machines' },
  machine_get: { method: 'get', path: '/api/machines/{id}', params: { id: 'id' } },
  machine_create: { method: 'post', path: '/api/machines' },
  machine_update: { method: 'patch', path: '/api/machines/{id}', params: { id: 'id' } },
  machine_start: { method: 'post', path: '/api/machines/{id}/start', params: { id: 'id' } },
  machine_stop: { method: 'post', path: '/api/machines/{id}/stop', params: { id: 'id' } },
  machine_pause: { method: 'post', path: '/api/machines/{id}/pause', params: { id: 'id' } },
  machine_resume: { method: 'post', path: '/api/machines/{id}/resume', params: { id: 'id' } },
  machine_destroy: { method: 'delete', path: '/api/machines/{id}', params: { id: 'id' } },
  machine_rotate_token: { method: 'post', path: '/api/machines/{id}/mcp-token', params: { id: 'id' } },
  machine_live_view: { method: 'post', path: '/api/machines/{id}/live-view', params: { id: 'id' } },
  template_create: { method: 'post', path: '/api/templates' },
  machine_fork: { method: 'post', path: '/api/machines/{id}/fork', params: { id: 'id' } },
  machine_run_command: { method: 'post', path: '/api/machines/{id}/runs', params: { id: 'id' } },
  machine_preview_url: { method: 'post', path: '/api/machines/{id}/previews', params: { id: 'id' } },
  event_webhook_create: { method: 'post', path: '/api/event-webhooks' },
  event_webhook_test: { method: 'post', path: '/api/event-webhooks/{id}/test', params: { id: 'id' } },
  event_webhook_delete: { method: 'delete', path: '/api/event-webhooks/{id}', params: { id: 'id' } },
  event_webhook_recover: { method: 'post', path: '/api/event-webhooks/{id}/recover', params: { id: 'id' } },
  event_webhook_replay: { method: 'post', path: '/api/event-webhooks/{id}/replay', params: { id: 'id' } },
  event_webhook_deliveries_list: { method: 'get', path: '/api/event-webhooks/deliveries' },
  events_list: { method: 'get', path: '/api/events' },
  run_command: { method: 'post', path: '/api/machines/{id}/runs' },
  process_start: { method: 'post', path: '/api/machines/{id}/processes' },
  process_output: { method: 'get', path: '/api/machines/{id}/processes/{procId}/output', params: { id: 'procId' } },
  process_input: { method: 'post', path: '/api/machines/{id}/processes/{procId}/input', params: { id: 'procId' } },
  process_signal: { method: 'post', path: '/api/machines/{id}/processes/{procId}/signal', params: { id: 'procId' } },
  file_read: { method: 'get', path: '/api/machines/{id}/files', toolOnly: ['encoding'] },
  file_list: { method: 'get', path: '/api/machines/{id}/files' },
  file_delete: { method: 'delete', path: '/api/machines/{id}/files' },
  file_write: { method: 'put', path: '/api/machines/{id}/files', toolOnly: ['content', 'encoding', 'append'] },
  preview_url: { method: 'post', path: '/api/machines/{id}/previews' },
};

/**
 * The limits of a schema: what it accepts, without the words that describe it. OpenAPI 3.0 has no
 * patternProperties: the document shows a map's values as additionalProperties (as @fastify/swagger writes it),
 * so a tool's map is compared in that form (its values' limits and maxProperties, not its keys' pattern).
 */
function limitsOf(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(limitsOf);
  if (schema === null || typeof schema !== 'object') return schema;
  const { description: _description, $schema: _dialect, patternProperties, ...limits } = schema as Record<string, unknown>;
  const asOpenApi = patternProperties === undefined ? limits : { ...limits, additionalProperties: Object.values(patternProperties as object)[0] };
  return Object.fromEntries(Object.entries(asOpenApi).map(([key, value]) => [key, limitsOf(value)]));
}

/** Every tool of both servers, with every capability a provider may have, as each advertises its inputSchema. */
function recordTools(sizes: readonly string[]): Map<string, Schema> {
  const tools = new Map<string, Schema>();
  const server = {
    registerTool(name: string, config: { inputSchema: { '~standard': { jsonSchema: { input: (options: { target: string }) => Schema } } } }) {
      tools.set(name, config.inputSchema['~standard'].jsonSchema.input({ target: 'draft-2020-12' }));
    },
  } as unknown as McpServer;
  const provider = { sizes, processes: {}, files: {}, computer: {} } as unknown as MachineProvider;
  const context = { logger: console, wait: DEFAULT_TOOL_WAIT } as unknown as MachineToolContext;
  registerMachineTools(server, context, provider);
  registerPreviewTools(server, context, {} as Previews);
  const platform = { deps: { logger: console } } as unknown as PlatformToolContext;
  for (const register of [machinePlatformTools(provider, DEFAULT_TOOL_WAIT), previewPlatformTools({} as Previews), eventWebhookTools({} as TestSending), billingPlatformTools()]) {
    register(server, platform);
  }
  return tools;
}

interface Operation {
  parameters?: Array<{ in: string; name: string; required?: boolean; schema: Schema }>;
  requestBody?: { content: Record<string, { schema: Schema }> };
}

describe("MCP tools' inputs and their HTTP twins", () => {
  let ctx: TestContext;
  let paths: Record<string, Record<string, Operation>>;
  let tools: Map<string, Schema>;

  before(async () => {
    ctx = await createMachineTestApp();
    tools = recordTools(ctx.app.machineProvider.sizes);
    paths = (await ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json().paths;
  });
  after(() => ctx.close());

  test('every tool is listed here, with a twin or as having none', () => {
    const withoutTwin = ['machine_info', 'run_get', 'run_wait', 'machine_run_get', 'machine_run_wait', 'process_list', 'screenshot', 'computer', 'event_webhooks_list', 'billing_get'];
    assert.deepEqual([...tools.keys()].sort(), [...Object.keys(TWINS), ...withoutTwin].sort());
  });

  test('a shared field has the same limits in the tool as in the route, and is required in both or neither', () => {
    for (const [name, twin] of Object.entries(TWINS)) {
      const tool = tools.get(name)!;
      const operation = paths[twin.path]?.[twin.method];
      assert.ok(operation, `${twin.method.toUpperCase()} ${twin.path} is documented`);
      const body = operation.requestBody?.content['application/json']?.schema;
      const fields = new Map<string, { schema: Schema; required: boolean }>();
      for (const [field, schema] of Object.entries(body?.properties ?? {})) fields.set(field, { schema, required: body?.required?.includes(field) ?? false });
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in === 'query') fields.set(parameter.name, { schema: parameter.schema, required: parameter.required ?? false });
      }
      const params = new Map((operation.parameters ?? []).filter((parameter) => parameter.in === 'path').map((parameter) => [parameter.name, parameter]));
      const toolFields = Object.keys(tool.properties ?? {});
      assert.ok(toolFields.length > 0, `${name} takes something from its route`);
      for (const field of toolFields) {
        if (twin.toolOnly?.includes(field)) continue;
        const fromPath = twin.params?.[field];
        const http = fromPath === undefined ? fields.get(field) : { schema: params.get(fromPath)?.schema, required: true };
        assert.ok(http?.schema, `${name}.${field} is a field of ${twin.method.toUpperCase()} ${twin.path}`);
        assert.deepEqual(limitsOf(tool.properties![field]), limitsOf(http.schema), `${name}.${field}: the tool's limits are the route's`);
        assert.equal(tool.required?.includes(field) ?? false, http.required, `${name}.${field} is required in both or neither`);
      }
      assert.equal(tool.additionalProperties, false, `${name} refuses unknown fields, as bodies do`);
    }
  });

  test("what tools/list advertises is the tool's schema as recorded here", async () => {
    const owner = await newOwner(ctx);
    const listed = (await ctx.app.inject({ method: 'POST', url: '/api/mcp', headers: { ...asBearer(owner.key), accept: 'application/json, text/event-stream' }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })).json().result.tools as Array<{ name: string; inputSchema: Schema }>;
    assert.ok(listed.length >= 20);
    for (const { name, inputSchema } of listed) assert.deepEqual(inputSchema, tools.get(name), name);
  });
});

describe('a tool refuses what its route refuses, saying which field and why', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createMachineTestApp();
  });
  after(() => ctx.close());

  test('the first error, as `field: what is wrong` after the SDK’s "Input validation error"', async () => {
    const owner = await newOwner(ctx);
    const call = async (name: string, args: unknown) => {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/mcp',
        headers: { ...asBearer(owner.key), accept: 'application/json, text/event-stream' },
        payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
      });
      const { result } = response.json() as { result: { isError?: boolean; content: Array<{ text: string }> } };
      assert.equal(result.isError, true);
      return result.content[0]!.text;
    };
    const id = 'mch_01jz0000000000000000000000';
    assert.equal(await call('machine_fork', { id, count: 11 }), 'Input validation error: Invalid arguments for tool machine_fork: count: must be <= 10');
    assert.equal(await call('machine_get', {}), "Input validation error: Invalid arguments for tool machine_get: must have required property 'id'");
    assert.equal(await call('machine_get', { id, extra: true }), 'Input validation error: Invalid arguments for tool machine_get: must NOT have additional properties (extra)');
    assert.equal(await call('machine_create', { name: 'x', labels: { 'a b': 'c' } }), 'Input validation error: Invalid arguments for tool machine_create: labels: must NOT have additional properties (a b)');
    assert.equal(await call('machine_create', { name: 'x', expiresAt: 'tomorrow' }), 'Input validation error: Invalid arguments for tool machine_create: expiresAt: must match format "date-time"');
    const http = await owner.call('POST', `/api/machines/${id}/fork`, { count: 11 });
    assert.equal(http.json().detail, 'body/count must be <= 10.', 'the same words over HTTP');
  });
});
