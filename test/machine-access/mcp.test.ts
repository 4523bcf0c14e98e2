import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { asSession, createApiKey } from '../support/app.ts';
import { assertRunEvent, eventCursor, finishBoot, listeningMachineSuite, newOwner, runningMachine, runsSettled } from '../support/machines.ts';

const MACHINE_TOOLS = [
  'machine_create',
  'machine_destroy',
  'machine_get',
  'machine_live_view',
  'machine_rotate_token',
  'machine_run_command',
  'machine_run_get',
  'machine_run_wait',
  'machine_start',
  'machine_stop',
  'machines_list',
];

describe('MCP over Streamable HTTP, with the official SDK client', () => {
  const suite = listeningMachineSuite();

  async function connect(path: string, token: string | undefined): Promise<Client> {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
    await client.connect(new StreamableHTTPClientTransport(new URL(path, suite.base), { requestInit: { headers } }));
    suite.clients.push(client);
    return client;
  }

  /** The result carries the JSON both as structuredContent and as its text. */
  function jsonOf(result: unknown): Record<string, unknown> {
    const call = result as CallToolResult;
    assert.notEqual(call.isError, true, JSON.stringify(call.content));
    assert.equal(call.content.length, 1);
    const [content] = call.content;
    assert.equal(content!.type, 'text');
    assert.deepEqual(JSON.parse((content as { text: string }).text), call.structuredContent);
    return call.structuredContent!;
  }

  function toolError(result: unknown): { status: number; code: string; detail: string } | string {
    const call = result as CallToolResult;
    assert.equal(call.isError, true, JSON.stringify(call));
    const error = (call.structuredContent as { error?: { status: number; code: string; detail: string } } | undefined)?.error;
    return error ?? (call.content[0] as { text: string }).text;
  }

  test('machine_create takes env (answered by its names only) and an image by name; a bad env name is the API’s 400', async () => {
    const client = await connect('/api/mcp', suite.owner.key);
    const created = jsonOf(await client.callTool({ name: 'machine_create', arguments: { name: 'env-made', image: 'default', env: { API_TOKEN: 'mcp-secret-value' } } }));
    assert.deepEqual([created.envNames, created.image], [['API_TOKEN'], 'default']);
    assert.ok(!JSON.stringify(created).includes('mcp-secret-value'));
    const row = await suite.ctx.app.deps.db.selectFrom('machines').select('env_sealed').where('id', '=', String(created.id)).executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(suite.ctx.app.deps.secrets.open(row.env_sealed!)), { API_TOKEN: 'mcp-secret-value' });
    const unknownImage = toolError(await client.callTool({ name: 'machine_create', arguments: { name: 'x', image: 'nope' } }));
    assert.equal(typeof unknownImage === 'string' ? unknownImage : unknownImage.status, 400);
    const badName = await client.callTool({ name: 'machine_create', arguments: { name: 'x', env: { '1X': 'y' } } });
    assert.equal((badName as CallToolResult).isError, true);
  });

  test('the platform server (API key) lists the machine tools and answers with the HTTP API’s JSON', async () => {
    const client = await connect('/api/mcp', suite.owner.key);
    const tools = (await client.listTools()).tools;
    const names = tools.map((tool) => tool.name);
    for (const name of MACHINE_TOOLS) assert.ok(names.includes(name), name);
    const create = tools.find((tool) => tool.name === 'machine_create')!;
    assert.deepEqual(create.inputSchema.required, ['name']);
    assert.equal((create.inputSchema as { additionalProperties?: boolean }).additionalProperties, false);

    const created = jsonOf(await client.callTool({ name: 'machine_create', arguments: { name: 'agent-made', labels: { via: 'mcp' } } }));
    assert.match(String(created.mcpToken), /^tmm_/);
    const id = String(created.id);
    const http = (await suite.owner.call('GET', `/api/machines/${id}`)).json();
    const { mcpToken: _token, ...withoutToken } = created;
    assert.deepEqual(withoutToken, http);

    await finishBoot(suite.ctx);
    assert.deepEqual(jsonOf(await client.callTool({ name: 'machine_get', arguments: { id } })), (await suite.owner.call('GET', `/api/machines/${id}`)).json());
    assert.deepEqual(jsonOf(await client.callTool({ name: 'machines_list', arguments: { limit: 1 } })), (await suite.owner.call('GET', '/api/machines?limit=1')).json());

    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const run = jsonOf(await client.callTool({ name: 'machine_run_command', arguments: { id, command: 'uptime' } }));
    assert.equal(run.status, 'succeeded');
    assert.deepEqual(run, (await suite.owner.call('GET', `/api/runs/${run.id}`)).json());
    const [event] = await events();
    assertRunEvent(event, 'run.succeeded', { id: String(run.id), source: 'manual', sourceId: null, status: 'succeeded', output: 'uptime' }, { ...http, labels: { via: 'mcp' } }, suite.ctx.clock.now());

    const link = jsonOf(await client.callTool({ name: 'machine_live_view', arguments: { id } }));
    assert.match(String(link.url), /\/live\//);
    assert.equal(jsonOf(await client.callTool({ name: 'machine_stop', arguments: { id } })).status, 'stopped');
    assert.equal(jsonOf(await client.callTool({ name: 'machine_start', arguments: { id } })).status, 'starting');
    const rotated = jsonOf(await client.callTool({ name: 'machine_rotate_token', arguments: { id } }));
    assert.notEqual(rotated.mcpToken, created.mcpToken);
    assert.equal(jsonOf(await client.callTool({ name: 'machine_destroy', arguments: { id } })).status, 'destroyed');
  });

  test('tool errors are MCP tool errors (isError), never crashes: unknown ids, wrong states, invalid input', async () => {
    const client = await connect('/api/mcp', suite.owner.key);
    assert.deepEqual(toolError(await client.callTool({ name: 'machine_get', arguments: { id: 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz' } })), {
      status: 404,
      code: 'not_found',
      detail: 'The machine was not found.',
    });
    const stranger = await runningMachine(suite.ctx, await newOwner(suite.ctx), { name: 'not-yours' });
    assert.equal((toolError(await client.callTool({ name: 'machine_stop', arguments: { id: stranger.id } })) as { code: string }).code, 'not_found');

    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'stateful' });
    assert.equal((toolError(await client.callTool({ name: 'machine_start', arguments: { id: machine.id } })) as { code: string }).code, 'invalid_state');
    assert.equal((toolError(await client.callTool({ name: 'machine_create', arguments: { name: 'x', size: 'enormous' } })) as { code: string }).code, 'invalid_request');

    for (const args of [{}, { id: 42 }, { id: machine.id, extra: true }]) {
      const message = toolError(await client.callTool({ name: 'machine_get', arguments: args }));
      assert.match(String(message), /Input validation error/);
    }
    // An unknown tool is a protocol error, not a tool result (MCP tools section): JSON-RPC -32602 Invalid params.
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), (error: { code?: number; message?: string }) => error.code === -32602 && /not found/.test(String(error.message)));
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running', 'the server is fine');
  });

  test("the machine server (machine token, or the owner's API key) serves the provider's tools", async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'self-aware', externalId: 'agent-1' });
    for (const token of [machine.mcpToken, suite.owner.key]) {
      const client = await connect(`/api/machines/${machine.id}/mcp`, token);
      const tools = (await client.listTools()).tools;
      assert.deepEqual(tools.map((tool) => tool.name).sort(), ['machine_info', 'run_command', 'run_get', 'run_wait']);
      assert.deepEqual(jsonOf(await client.callTool({ name: 'machine_info', arguments: {} })), (await suite.owner.call('GET', `/api/machines/${machine.id}`)).json());
      const run = jsonOf(await client.callTool({ name: 'run_command', arguments: { command: 'exit 4' } }));
      assert.equal(run.status, 'failed');
      assert.equal(run.exitCode, 4);
      assert.equal(run.machineId, machine.id);
      assert.match(String(toolError(await client.callTool({ name: 'run_command', arguments: { command: '' } }))), /Input validation error/);
    }
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const client = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken);
    const refused = toolError(await client.callTool({ name: 'run_command', arguments: { command: 'shutdown-soon', stopAfter: true } }));
    assert.deepEqual(refused, { status: 403, code: 'forbidden', detail: "A machine token cannot stop its machine: stopAfter needs the owner's API key." });
    assert.deepEqual(await events(), [], 'nothing ran, nothing stopped');
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');
    assert.equal(jsonOf(await client.callTool({ name: 'run_command', arguments: { command: 'ls', stopAfter: false } })).status, 'succeeded', 'stopAfter false is fine');
    await events();

    const asOwner = await connect(`/api/machines/${machine.id}/mcp`, suite.owner.key);
    const run = jsonOf(await asOwner.callTool({ name: 'run_command', arguments: { command: 'shutdown-soon', stopAfter: true } }));
    assert.equal(run.stopAfter, true);
    assert.equal(run.status, 'succeeded', 'the tool waits for the outcome');
    await runsSettled(suite.ctx);
    assert.deepEqual((await events()).map((e) => e.type), ['run.succeeded', 'machine.stopped']);
    const stopped = toolError(await client.callTool({ name: 'run_command', arguments: { command: 'ls' } }));
    assert.equal((stopped as { code: string }).code, 'invalid_state', 'a stopped machine runs nothing');
  });

  test('regression: a machine token stopped its machine through run_command stopAfter (spec 5 rule 2: it cannot stop anything)', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'agent-box' });
    const client = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken);
    const result = (await client.callTool({ name: 'run_command', arguments: { command: 'true', stopAfter: true } })) as CallToolResult;
    assert.equal(result.isError, true);
    assert.equal((result.structuredContent as { error: { code: string } }).error.code, 'forbidden');
    await runsSettled(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/machines/${machine.id}`)).json().status, 'running');
    assert.deepEqual((await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data, [], 'no run either');
  });

  test('a tool that throws something other than an AppError answers an isError result with code internal_error, and leaks nothing', async () => {
    const { defineTool, NoInput } = await import('../../src/mcp/tools.ts');
    const secret = 'connection to 10.0.0.7:5432 refused for user admin';
    suite.ctx.app.platformMcpTools.push((server, { deps }) =>
      defineTool(server, deps.logger, 'exploding_tool', { description: 'test only', input: NoInput }, async () => {
        throw new Error(secret);
      }),
    );
    try {
      const client = await connect('/api/mcp', suite.owner.key);
      const result = (await client.callTool({ name: 'exploding_tool', arguments: {} })) as CallToolResult;
      assert.equal(result.isError, true);
      assert.deepEqual(result.structuredContent, {
        error: { status: 500, code: 'internal_error', detail: 'Something went wrong on our side. The error has been logged.' },
      });
      assert.deepEqual(result.content, [{ type: 'text', text: 'internal_error: Something went wrong on our side. The error has been logged.' }]);
      assert.ok(!JSON.stringify(result).includes('10.0.0.7'));
      assert.equal((await suite.owner.call('GET', '/api/machines')).statusCode, 200, 'the server is fine');
    } finally {
      suite.ctx.app.platformMcpTools.pop();
    }
  });

  test('a revoked API key is refused on both MCP endpoints: 401 with WWW-Authenticate: Bearer', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'revocation' });
    const key = await createApiKey(suite.ctx, suite.owner.user, 'short-lived');
    const keys = (await suite.ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asSession(suite.owner.user.session) })).json().data as Array<{ id: string; name: string }>;
    const id = keys.find((k) => k.name === 'short-lived')?.id;
    assert.ok(id, 'the new key is listed');
    const post = (path: string) =>
      fetch(new URL(path, suite.base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    for (const path of ['/api/mcp', `/api/machines/${machine.id}/mcp`]) assert.equal((await post(path)).status, 200, `${path} before`);
    assert.equal((await suite.ctx.app.inject({ method: 'DELETE', url: `/api/keys/${id}`, headers: asSession(suite.owner.user.session) })).statusCode, 204);
    for (const path of ['/api/mcp', `/api/machines/${machine.id}/mcp`]) {
      const response = await post(path);
      assert.equal(response.status, 401, path);
      assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer/, path);
      await assert.rejects(connect(path, key), /401|Unauthorized/i, path);
    }
  });

  test('without a token, or with a bad one, the SDK client is refused: 401 with WWW-Authenticate: Bearer', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'guarded' });
    for (const [path, token] of [['/api/mcp', undefined], ['/api/mcp', 'tmk_nope'], [`/api/machines/${machine.id}/mcp`, undefined], [`/api/machines/${machine.id}/mcp`, 'tmm_nope']] as const) {
      await assert.rejects(connect(path, token), /401|Unauthorized/i, `${path} ${token}`);
      const raw = await fetch(new URL(path, suite.base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(raw.status, 401);
      assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer/);
    }
    const wrongPlace = await fetch(new URL('/api/mcp', suite.base), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${machine.mcpToken}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(wrongPlace.status, 403, 'a machine token is not a platform credential');
  });

  test('other domains contribute platform tools through app.platformMcpTools', async () => {
    const { defineTool, NoInput } = await import('../../src/mcp/tools.ts');
    suite.ctx.app.platformMcpTools.push((server, { deps, accountId }) =>
      defineTool(server, deps.logger, 'probe_tool', { description: 'test only', input: NoInput }, async () => ({ accountId })),
    );
    try {
      const client = await connect('/api/mcp', suite.owner.key);
      assert.ok((await client.listTools()).tools.some((tool) => tool.name === 'probe_tool'));
      assert.deepEqual(jsonOf(await client.callTool({ name: 'probe_tool', arguments: {} })), { accountId: suite.owner.user.id });
    } finally {
      suite.ctx.app.platformMcpTools.pop();
    }
  });

  test('answers current and previous protocol revisions; GET is 405 (no SSE stream)', async () => {
    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
      const response = await fetch(new URL('/api/mcp', suite.base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${suite.owner.key}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'old', version: '0' } } }),
      });
      assert.equal(response.status, 200);
      assert.equal(((await response.json()) as { result: { protocolVersion: string } }).result.protocolVersion, version);
    }
    const get = await fetch(new URL('/api/mcp', suite.base), { headers: { accept: 'text/event-stream', authorization: `Bearer ${suite.owner.key}` } });
    assert.equal(get.status, 405);
  });
});
