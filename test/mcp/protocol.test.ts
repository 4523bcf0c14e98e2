import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { listeningMachineSuite, runningMachine, type CreatedMachine } from '../support/machines.ts';
import { connectApplication, registerClient } from '../support/oauth.ts';

/** CONTRACT 14: revisions 2024-11-05 through 2025-11-25, and 2026-07-28, on both MCP endpoints. */
describe('protocol revisions: a client pinned to 2026-07-28 and one pinned to 2025-06-18, on both endpoints', () => {
  const suite = listeningMachineSuite();
  let machine: CreatedMachine;
  let oauthToken: string;

  before(async () => {
    machine = await runningMachine(suite.ctx, suite.owner, { name: 'pinned' });
    oauthToken = (await connectApplication(suite.ctx, suite.owner.user, await registerClient(suite.ctx))).access_token;
  });

  const pins: Record<'2026-07-28' | '2025-06-18', ConstructorParameters<typeof Client>[1]> = {
    '2026-07-28': { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    '2025-06-18': { supportedProtocolVersions: ['2025-06-18'] },
  };

  async function connect(path: string, token: string, revision: keyof typeof pins): Promise<Client> {
    const client = new Client({ name: `pinned-${revision}`, version: '1.0.0' }, pins[revision]);
    await client.connect(new StreamableHTTPClientTransport(new URL(path, suite.base), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    suite.clients.push(client);
    assert.equal(client.getNegotiatedProtocolVersion(), revision);
    return client;
  }

  for (const revision of ['2026-07-28', '2025-06-18'] as const) {
    test(`${revision}: the platform endpoint (API key and OAuth token) lists and calls tools`, async () => {
      for (const token of [suite.owner.key, oauthToken]) {
        const client = await connect('/api/mcp', token, revision);
        const names = (await client.listTools()).tools.map((tool) => tool.name);
        assert.ok(names.includes('machines_list') && names.includes('event_webhooks_list'), names.join());
        const result = await client.callTool({ name: 'machine_get', arguments: { id: machine.id } });
        assert.equal((result.structuredContent as { id?: string }).id, machine.id);
        await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), (error: { code?: number }) => error.code === -32602, 'an unknown tool is -32602');
      }
    });

    test(`${revision}: the machine endpoint (machine token) lists and calls the provider's tools`, async () => {
      const client = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken, revision);
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      assert.deepEqual(names.sort(), ['machine_info', 'run_command', 'run_get', 'run_wait']);
      const info = await client.callTool({ name: 'machine_info', arguments: {} });
      assert.equal((info.structuredContent as { id?: string }).id, machine.id);
    });
  }
});
