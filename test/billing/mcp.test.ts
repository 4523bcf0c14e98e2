import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { TestContext } from '../support/app.ts';
import { newOwner, type Owner } from '../support/machines.ts';
import { createBillingTestApp, saveCard, topUp } from './helpers.ts';

describe('MCP: billing_get on the platform server', () => {
  let ctx: TestContext;
  let owner: Owner;
  let base: string;
  let client: Client;
  before(async () => {
    ctx = await createBillingTestApp();
    owner = await newOwner(ctx);
    base = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    client = new Client({ name: 'test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL('/api/mcp', base), { requestInit: { headers: { authorization: `Bearer ${owner.key}` } } }));
  });
  after(async () => {
    await client.close();
    await ctx.close();
  });

  test('answers what GET /api/billing answers, as structured content and as text; unknown arguments are refused', async () => {
    const tool = (await client.listTools()).tools.find((t) => t.name === 'billing_get');
    assert.ok(tool, 'billing_get is listed');
    assert.equal(tool.annotations?.readOnlyHint, true);
    await saveCard(owner);
    assert.equal((await topUp(ctx, owner, '12.50')).statusCode, 201);
    const result = (await client.callTool({ name: 'billing_get', arguments: {} })) as CallToolResult;
    assert.notEqual(result.isError, true);
    const http = (await owner.call('GET', '/api/billing')).json();
    assert.deepEqual(result.structuredContent, http);
    assert.deepEqual(JSON.parse((result.content[0] as { text: string }).text), http);
    assert.equal(http.balance, '12.500000');
    const bad = (await client.callTool({ name: 'billing_get', arguments: { accountId: 'acct_other' } })) as CallToolResult;
    assert.equal(bad.isError, true);
  });
});
