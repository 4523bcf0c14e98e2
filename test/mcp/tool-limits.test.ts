import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createApiKey, createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { freshDatabase, onPostgres, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { connectApplication, mcpCall, registerClient, tokenRequest } from '../support/oauth.ts';

const LIMIT = 5;

function toolCall(id: number | string, name = 'event_webhooks_list') {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } };
}

async function post(url: string, token: string, body: unknown): Promise<Response> {
  return fetch(`${url}/api/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify(body),
  });
}

/** The spec's tools section: servers MUST rate-limit tool invocations (CONTRACT 14: MCP_TOOL_CALLS_PER_MINUTE). */
describe('tool calls past the limit: 429 with Retry-After, across two processes sharing a database', () => {
  let database: TestDatabase;
  let sqliteDir: string | undefined;
  const processes: ServiceProcess[] = [];

  before(async () => {
    sqliteDir = onPostgres ? undefined : await mkdtemp(join(tmpdir(), 'mcp-limits-'));
    database = await freshDatabase(sqliteDir ? join(sqliteDir, 'service.db') : undefined);
    const env = { DATABASE_URL: urlWithSchema(database), MCP_TOOL_CALLS_PER_MINUTE: String(LIMIT), ...(sqliteDir ? { MAIL_DIR: join(sqliteDir, 'mail') } : {}) };
    // One after the other: the first migrates, the second finds the schema ready.
    processes.push(await startServiceProcess(env));
    processes.push(await startServiceProcess(env));
  });
  after(async () => {
    for (const service of processes) await service.kill('SIGTERM');
    await database.drop();
    if (sqliteDir) await rm(sqliteDir, { recursive: true, force: true });
  });

  test('calls through either process count against one limit per credential; the excess is a JSON-RPC error with the id', async () => {
    const [first, second] = processes as [ServiceProcess, ServiceProcess];
    const registered = await fetch(`${first.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: first.url },
      body: JSON.stringify({ email: `limits-${Date.now()}@example.com`, password: 'correct horse battery', name: 'Limits' }),
    });
    assert.equal(registered.status, 201);
    const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
    const keyOf = async () => (await (await fetch(`${first.url}/api/keys`, { method: 'POST', headers: { cookie, origin: first.url, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'agent' }) })).json()).key as string;
    const key = await keyOf();

    for (let i = 1; i <= LIMIT; i++) {
      const response = await post((i % 2 === 0 ? first : second).url, key, toolCall(i));
      assert.equal(response.status, 200, `call ${i}`);
    }
    for (const service of [first, second]) {
      const refused = await post(service.url, key, toolCall('over-the-limit'));
      assert.equal(refused.status, 429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
      const body = await refused.json();
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.id, 'over-the-limit');
      assert.equal(typeof body.error.code, 'number');
      assert.match(body.error.message, /Too many tool calls/);
    }
    assert.equal((await post(second.url, key, { jsonrpc: '2.0', id: 9, method: 'tools/list' })).status, 200, 'only tools/call is counted');
    assert.equal((await post(first.url, await keyOf(), toolCall(1))).status, 200, 'another credential has its own count');
  });
});

describe('tool-call limits in one process', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp({ env: { MCP_TOOL_CALLS_PER_MINUTE: String(LIMIT) } });
  });
  after(() => ctx.close());

  test("an OAuth grant's tokens count as one credential; the window is one minute; a batch counts each call", async () => {
    const user = await registerUser(ctx);
    const clientId = await registerClient(ctx);
    const tokens = await connectApplication(ctx, user, clientId);
    for (let i = 0; i < 3; i++) assert.equal((await mcpCall(ctx, tokens.access_token, 'tools/call', { name: 'event_webhooks_list', arguments: {} })).statusCode, 200);
    const refreshed = (await tokenRequest(ctx, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })).json();
    for (let i = 0; i < 2; i++) assert.equal((await mcpCall(ctx, refreshed.access_token, 'tools/call', { name: 'event_webhooks_list', arguments: {} })).statusCode, 200);
    const refused = await mcpCall(ctx, refreshed.access_token, 'tools/call', { name: 'event_webhooks_list', arguments: {} });
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.headers['retry-after'], '60');
    assert.equal(refused.json().id, 1);

    ctx.clock.advance(60_000);
    assert.equal((await mcpCall(ctx, refreshed.access_token, 'tools/call', { name: 'event_webhooks_list', arguments: {} })).statusCode, 200, 'a new window');

    const key = await createApiKey(ctx, user);
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/mcp',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      payload: Array.from({ length: LIMIT + 1 }, (_, i) => toolCall(i + 1)),
    });
    assert.equal(batch.statusCode, 429);
    assert.deepEqual(batch.json().map((error: { id: number }) => error.id), [1, 2, 3, 4, 5, 6]);
  });

  test('RATE_LIMIT=off turns it off too', async () => {
    const off = await createTestApp({ env: { MCP_TOOL_CALLS_PER_MINUTE: '1', RATE_LIMIT: 'off' } });
    try {
      const key = await createApiKey(off, await registerUser(off));
      for (let i = 0; i < 3; i++) assert.equal((await mcpCall(off, key, 'tools/call', { name: 'event_webhooks_list', arguments: {} })).statusCode, 200);
    } finally {
      await off.close();
    }
  });
});
