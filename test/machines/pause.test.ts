import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { inTransaction } from '../../src/db/transaction.ts';
import { markPaused } from '../../src/machines/machine-transitions.ts';
import { findMachineById } from '../../src/machines/machines.repository.ts';
import { eventCursor, finishBoot, listeningMachineSuite, runningMachine, workerPass } from '../support/machines.ts';

const MINUTE = 60_000;

/**
 * CONTRACT 20 on the simulated provider: pause and resume through the API and
 * the platform's MCP tools, the states they are refused in (changing
 * nothing), what a paused machine refuses (its tools, runs) and what it still
 * does (stop, destroy, expire).
 */
describe('pause and resume (CONTRACT 20)', () => {
  const suite = listeningMachineSuite();

  async function connect(path: string, token: string): Promise<Client> {
    const client = new Client({ name: 'pause-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(path, suite.base), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    suite.clients.push(client);
    return client;
  }
  const machineOf = async (id: string) => (await suite.owner.call('GET', `/api/machines/${id}`)).json();

  test('pause → paused (machine.paused), resume → running (machine.resumed); the machine answers as it is', async () => {
    const subscribed = await suite.owner.call('POST', '/api/event-webhooks', { url: 'https://hooks.example.com/pause', events: ['machine.paused', 'machine.resumed'] });
    assert.equal(subscribed.statusCode, 201, 'the new types can be subscribed to');
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'sleeper' });
    const fresh = eventCursor(suite.ctx, suite.owner);
    await fresh();
    const paused = await suite.owner.call('POST', `/api/machines/${machine.id}/pause`);
    assert.equal(paused.statusCode, 200, paused.body);
    assert.equal(paused.json().status, 'paused');
    assert.deepEqual(await machineOf(machine.id), paused.json());
    assert.deepEqual((await suite.owner.call('GET', '/api/machines?status=paused')).json().data.map((m: { id: string }) => m.id), [machine.id]);
    // Its check goes on while paused, and changes nothing.
    suite.ctx.clock.advance(2 * MINUTE);
    await workerPass(suite.ctx);
    assert.equal((await machineOf(machine.id)).status, 'paused');
    const resumed = await suite.owner.call('POST', `/api/machines/${machine.id}/resume`);
    assert.equal(resumed.statusCode, 200, resumed.body);
    assert.equal(resumed.json().status, 'running');
    assert.deepEqual((await fresh()).map((event) => [event.type, (event.data.machine as { status: string }).status]), [
      ['machine.paused', 'paused'],
      ['machine.resumed', 'running'],
    ]);
  });

  test('bad states are 409 invalid_state and change nothing: pause a stopped or paused machine, resume a running one', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'picky' });
    const fresh = eventCursor(suite.ctx, suite.owner);
    await fresh();
    const resumeRunning = await suite.owner.call('POST', `/api/machines/${machine.id}/resume`);
    assert.equal(resumeRunning.statusCode, 409);
    assert.equal(resumeRunning.json().code, 'invalid_state');
    assert.match(resumeRunning.json().detail, /running/);
    const before = await machineOf(machine.id);

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    const pauseTwice = await suite.owner.call('POST', `/api/machines/${machine.id}/pause`);
    assert.equal(pauseTwice.statusCode, 409);
    assert.equal(pauseTwice.json().code, 'invalid_state');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/start`)).statusCode, 409, 'a paused machine is not started');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200, 'but stops');
    const stopped = await machineOf(machine.id);
    assert.equal(stopped.status, 'stopped');

    for (const action of ['pause', 'resume']) {
      const refused = await suite.owner.call('POST', `/api/machines/${machine.id}/${action}`);
      assert.equal(refused.statusCode, 409, action);
      assert.equal(refused.json().code, 'invalid_state');
      assert.match(refused.json().detail, /stopped/);
    }
    assert.deepEqual(await machineOf(machine.id), stopped, 'nothing changed');
    assert.deepEqual((await fresh()).map((event) => event.type), ['machine.paused', 'machine.stopped']);
    assert.notDeepEqual(before, stopped);

    const unknown = await suite.owner.call('POST', '/api/machines/mch_01jzzzzzzzzzzzzzzzzzzzzzzz/pause');
    assert.equal(unknown.statusCode, 404);
  });

  test('a host that fails to pause: 502 provider_error, and the machine is still running', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'stubborn' });
    const provider = suite.ctx.app.machineProvider as unknown as { pause: (m: { id: string }) => Promise<void> };
    const original = provider.pause;
    provider.pause = async () => {
      throw new Error('host unreachable (pause)');
    };
    try {
      const failed = await suite.owner.call('POST', `/api/machines/${machine.id}/pause`);
      assert.equal(failed.statusCode, 502);
      assert.equal(failed.json().code, 'provider_error');
      assert.equal((await machineOf(machine.id)).status, 'running');
    } finally {
      provider.pause = original;
    }
  });

  test('the machine\'s check records the pause first (the engine reported it as an event): the request answers the paused machine, one machine.paused', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'raced' });
    const fresh = eventCursor(suite.ctx, suite.owner);
    await fresh();
    const provider = suite.ctx.app.machineProvider as unknown as { pause: (m: { id: string }) => Promise<void> };
    const original = provider.pause;
    provider.pause = async (target) => {
      await original.call(suite.ctx.app.machineProvider, target);
      const row = (await findMachineById(suite.ctx.app.deps.db, target.id))!;
      await inTransaction(suite.ctx.app.deps.database, (tx) => markPaused(suite.ctx.app.deps, tx, row, null));
    };
    try {
      const paused = await suite.owner.call('POST', `/api/machines/${machine.id}/pause`);
      assert.equal(paused.statusCode, 200, paused.body);
      assert.equal(paused.json().status, 'paused');
    } finally {
      provider.pause = original;
    }
    assert.deepEqual((await fresh()).map((event) => event.type), ['machine.paused']);
  });

  test('a paused machine: its MCP tools and runs answer 409 invalid_state naming resume; it is destroyed and expires as any other', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'frozen' });
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);

    const agent = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken);
    const result = (await agent.callTool({ name: 'run_command', arguments: { command: 'echo hi' } })) as CallToolResult;
    assert.equal(result.isError, true, JSON.stringify(result));
    const error = (result.structuredContent as { error: { status: number; code: string; detail: string } }).error;
    assert.deepEqual([error.status, error.code], [409, 'invalid_state']);
    assert.match(error.detail, /paused.*resume/i);
    // Reading the service's own record of the machine touches nothing inside it.
    const info = (await agent.callTool({ name: 'machine_info', arguments: {} })) as CallToolResult;
    assert.equal((info.structuredContent as { status: string }).status, 'paused');

    const run = await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'echo hi' });
    assert.equal(run.statusCode, 409);
    assert.match(run.json().detail, /resume/i);

    const destroyed = await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assert.equal(destroyed.statusCode, 200, destroyed.body);
    assert.equal(destroyed.json().status, 'destroyed');

    const expiring = await runningMachine(suite.ctx, suite.owner, { name: 'ephemeral', expiresAt: new Date(suite.ctx.clock.now() + 5 * MINUTE).toISOString() });
    assert.equal((await suite.owner.call('POST', `/api/machines/${expiring.id}/pause`)).statusCode, 200);
    suite.ctx.clock.advance(5 * MINUTE);
    await workerPass(suite.ctx);
    assert.equal((await machineOf(expiring.id)).status, 'stopped', 'expired from paused: stopped (onExpire stop)');
  });

  test('a machine waiting in a warm pool is not paused (409 invalid_state): claimed, it is', async () => {
    const pool = await suite.owner.call('POST', '/api/pools', { name: 'nappers', size: 'small', count: 1 });
    assert.equal(pool.statusCode, 201, pool.body);
    await finishBoot(suite.ctx);
    const warm = (await suite.owner.call('GET', '/api/machines?limit=100')).json().data.find((m: { name: string }) => m.name.startsWith('nappers-'));
    assert.equal(warm.status, 'running');
    const refused = await suite.owner.call('POST', `/api/machines/${warm.id}/pause`);
    assert.equal(refused.statusCode, 409);
    assert.match(refused.json().detail, /pool/);
    assert.equal((await machineOf(warm.id)).status, 'running');
    const claimed = await suite.owner.call('POST', '/api/machines', { name: 'claimed-napper', pool: 'nappers' });
    assert.equal(claimed.json().id, warm.id);
    assert.equal((await suite.owner.call('POST', `/api/machines/${warm.id}/pause`)).statusCode, 200);
    assert.equal((await suite.owner.call('DELETE', `/api/pools/${pool.json().id}`)).statusCode, 204);
  });

  test('the platform MCP tools machine_pause and machine_resume answer what the HTTP API answers', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'tool-made' });
    const client = await connect('/api/mcp', suite.owner.key);
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(names.includes('machine_pause') && names.includes('machine_resume'));
    const paused = (await client.callTool({ name: 'machine_pause', arguments: { id: machine.id } })) as CallToolResult;
    assert.notEqual(paused.isError, true, JSON.stringify(paused));
    assert.deepEqual(paused.structuredContent, await machineOf(machine.id));
    assert.equal((paused.structuredContent as { status: string }).status, 'paused');
    const again = (await client.callTool({ name: 'machine_pause', arguments: { id: machine.id } })) as CallToolResult;
    assert.equal(again.isError, true);
    assert.equal((again.structuredContent as { error: { code: string } }).error.code, 'invalid_state');
    const resumed = (await client.callTool({ name: 'machine_resume', arguments: { id: machine.id } })) as CallToolResult;
    assert.equal((resumed.structuredContent as { status: string }).status, 'running');
  });

  test('the OpenAPI document describes both routes with their errors', async () => {
    const doc = (await suite.ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    for (const action of ['pause', 'resume']) {
      const operation = doc.paths[`/api/machines/{id}/${action}`]?.post;
      assert.ok(operation, action);
      const codes = Object.keys(operation.responses);
      assert.ok(codes.includes('200') && codes.some((code) => /^4/.test(code)) && codes.some((code) => /^5/.test(code)), `${action}: ${codes.join(', ')}`);
      assert.match(JSON.stringify(operation.responses['200']), /"paused"/, 'the status enum names paused');
    }
  });
});
