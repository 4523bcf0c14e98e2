import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import { asBearer, createApiKey, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { emit } from './helpers.ts';

describe('event webhook tools on the platform MCP server, with the official SDK client', () => {
  let ctx: TestContext;
  let user: TestUser;
  let key: string;
  let base: string;
  let hook: Receiver;
  const clients: Client[] = [];

  before(async () => {
    ctx = await createTestApp({ realClock: true });
    user = await registerUser(ctx);
    key = await createApiKey(ctx, user);
    hook = await startReceiver();
    base = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    for (const client of clients) await client.close();
    await hook.close();
    await ctx.close();
  });

  async function connect(token: string | undefined): Promise<Client> {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
    await client.connect(new StreamableHTTPClientTransport(new URL('/api/mcp', base), { requestInit: { headers } }));
    clients.push(client);
    return client;
  }

  function jsonOf(result: unknown): Record<string, unknown> {
    const call = result as CallToolResult;
    assert.notEqual(call.isError, true, JSON.stringify(call.content));
    const [content] = call.content;
    assert.equal(content!.type, 'text');
    assert.deepEqual(JSON.parse((content as { text: string }).text), call.structuredContent);
    return call.structuredContent!;
  }

  const http = (method: 'GET' | 'POST', url: string) => ctx.app.inject({ method, url, headers: asBearer(key) });

  test('lists, creates, tests and deletes endpoints with the same JSON as the HTTP API', async () => {
    const client = await connect(key);
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    for (const name of ['event_webhooks_list', 'event_webhook_create', 'event_webhook_test', 'event_webhook_delete']) assert.ok(names.includes(name), name);

    const created = jsonOf(await client.callTool({ name: 'event_webhook_create', arguments: { url: hook.url, events: ['machine.created'], description: 'from an agent' } }));
    assert.match(String(created.secret), /^whsec_/);
    const id = String(created.id);
    const { secret, ...withoutSecret } = created;
    assert.deepEqual(withoutSecret, (await http('GET', `/api/event-webhooks/${id}`)).json());

    assert.deepEqual(jsonOf(await client.callTool({ name: 'event_webhooks_list', arguments: {} })), (await http('GET', '/api/event-webhooks')).json());

    const tested = jsonOf(await client.callTool({ name: 'event_webhook_test', arguments: { id } }));
    assert.deepEqual(tested, { ok: true, status: 200, error: null });
    const [request] = hook.requests;
    assert.equal(verifyWebhook(request!.body, String(request!.headers['service-signature']), String(secret)).type, 'webhook.test');

    assert.deepEqual(jsonOf(await client.callTool({ name: 'event_webhook_delete', arguments: { id } })), { id, deleted: true });
    assert.equal((await http('GET', `/api/event-webhooks/${id}`)).statusCode, 404);
  });

  test('bad input and unknown ids are tool errors with the HTTP problem code, not crashes', async () => {
    const client = await connect(key);
    const http = (await client.callTool({ name: 'event_webhook_create', arguments: { url: 'http://insecure.example.com/hook' } })) as CallToolResult;
    assert.equal(http.isError, true);
    assert.equal((http.structuredContent as { error: { code: string } }).error.code, 'invalid_request');
    const unknown = (await client.callTool({ name: 'event_webhook_test', arguments: { id: 'ep_00000000000000000000000000' } })) as CallToolResult;
    assert.equal(unknown.isError, true);
    assert.equal((unknown.structuredContent as { error: { code: string } }).error.code, 'not_found');
    const extra = (await client.callTool({ name: 'event_webhook_delete', arguments: { id: 'ep_x', force: true } })) as CallToolResult;
    assert.equal(extra.isError, true, 'unknown fields are refused');
    const badType = (await client.callTool({ name: 'event_webhook_create', arguments: { url: hook.url, events: ['machine.exploded'] } })) as CallToolResult;
    assert.equal(badType.isError, true);
  });

  test('events_list, event_webhook_deliveries_list, recover and replay: the same JSON as the HTTP API', async () => {
    const owner = await registerUser(ctx);
    const ownerKey = await createApiKey(ctx, owner);
    const client = await connect(ownerKey);
    const call = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) =>
      ctx.app.inject({ method, url, headers: asBearer(ownerKey), ...(payload ? { payload } : {}) });
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    for (const name of ['events_list', 'event_webhook_deliveries_list', 'event_webhook_recover', 'event_webhook_replay']) assert.ok(names.includes(name), name);
    const since = new Date(Date.now() - 60_000).toISOString();
    const endpoint = jsonOf(await client.callTool({ name: 'event_webhook_create', arguments: { url: `${hook.url}/history` } }));
    const id = String(endpoint.id);
    jsonOf(await client.callTool({ name: 'event_webhook_test', arguments: { id } }));
    await emit(ctx, owner.id, 'machine.created');
    await emit(ctx, owner.id, 'run.failed', { run: {}, machine: {} });
    await ctx.app.jobs.drain();

    assert.deepEqual(jsonOf(await client.callTool({ name: 'events_list', arguments: {} })), (await call('GET', '/api/events')).json());
    assert.deepEqual(jsonOf(await client.callTool({ name: 'events_list', arguments: { type: 'run.failed', limit: 1 } })), (await call('GET', '/api/events?type=run.failed&limit=1')).json());
    assert.deepEqual(
      jsonOf(await client.callTool({ name: 'event_webhook_deliveries_list', arguments: { endpoint: id, status: 'delivered', eventType: 'machine.created' } })),
      (await call('GET', `/api/event-webhooks/deliveries?endpoint=${id}&status=delivered&eventType=machine.created`)).json(),
    );
    assert.deepEqual(jsonOf(await client.callTool({ name: 'event_webhook_recover', arguments: { id, since } })), { count: 0 });
    assert.deepEqual(jsonOf(await client.callTool({ name: 'event_webhook_replay', arguments: { id, since } })), { count: 0 });
    const tooOld = (await client.callTool({ name: 'event_webhook_recover', arguments: { id, since: '2000-01-01T00:00:00.000Z' } })) as CallToolResult;
    assert.equal(tooOld.isError, true);
    assert.equal((tooOld.structuredContent as { error: { code: string } }).error.code, 'invalid_request');
    const foreign = (await client.callTool({ name: 'event_webhook_recover', arguments: { id: 'ep_00000000000000000000000000', since } })) as CallToolResult;
    assert.equal((foreign.structuredContent as { error: { code: string } }).error.code, 'not_found');
  });

  test("events_list {machineId}: one machine's events, the same JSON as GET /api/events?machineId (issue 38: only a type filter)", async () => {
    const owner = await registerUser(ctx);
    const ownerKey = await createApiKey(ctx, owner);
    const client = await connect(ownerKey);
    const call = (url: string) => ctx.app.inject({ method: 'GET', url, headers: asBearer(ownerKey) });
    const mine = 'mch_01jd00000000000000000000aa';
    const theirs = 'mch_01jd00000000000000000000bb';
    await emit(ctx, owner.id, 'machine.created', { machine: { id: mine, name: 'mine' }, detail: {} });
    await emit(ctx, owner.id, 'machine.created', { machine: { id: theirs, name: 'theirs' }, detail: {} });
    await emit(ctx, owner.id, 'run.failed', { run: { id: 'run_01jd00000000000000000000cc' }, machine: { id: mine, name: 'mine' } });

    const listed = jsonOf(await client.callTool({ name: 'events_list', arguments: { machineId: mine } })) as { data: Array<{ type: string; data: { machine: { id: string } } }> };
    assert.deepEqual(listed.data.map((event) => [event.type, event.data.machine.id]), [['run.failed', mine], ['machine.created', mine]]);
    assert.deepEqual(listed, (await call(`/api/events?machineId=${mine}`)).json());
    assert.deepEqual(jsonOf(await client.callTool({ name: 'events_list', arguments: { machineId: mine, type: 'run.failed' } })), (await call(`/api/events?machineId=${mine}&type=run.failed`)).json());
    const bad = (await client.callTool({ name: 'events_list', arguments: { machineId: 'nope' } })) as CallToolResult;
    assert.equal(bad.isError, true, 'a malformed machineId is refused');
  });

  test('the 11th endpoint through MCP is a limit_reached tool error', async () => {
    const owner = await registerUser(ctx);
    const client = await connect(await createApiKey(ctx, owner));
    for (let i = 0; i < 10; i++) jsonOf(await client.callTool({ name: 'event_webhook_create', arguments: { url: `${hook.url}/${i}` } }));
    const eleventh = (await client.callTool({ name: 'event_webhook_create', arguments: { url: hook.url } })) as CallToolResult;
    assert.equal(eleventh.isError, true);
    assert.equal((eleventh.structuredContent as { error: { code: string } }).error.code, 'limit_reached');
    assert.equal((jsonOf(await client.callTool({ name: 'event_webhooks_list', arguments: {} })).data as unknown[]).length, 10);
  });

  test('without a token the server answers 401 with WWW-Authenticate: Bearer', async () => {
    const response = await fetch(new URL('/api/mcp', base), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(response.status, 401);
    assert.match(String(response.headers.get('www-authenticate')), /^Bearer/);
    await assert.rejects(connect(undefined));
  });
});
