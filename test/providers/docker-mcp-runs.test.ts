import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { dockerUnavailable, listeningDockerSuite, runningDockerMachine } from '../support/docker.ts';

const skip = await dockerUnavailable();

/** The tools' answer deadline here (50 s in production): `sleep 4` outlasts it. */
const DEADLINE_MS = 2000;

/**
 * Issue 38.2 against a real Docker engine: a command longer than the answer
 * deadline is answered still running with its runId, and its outcome reaches
 * the agent through run_wait, with the official SDK client's default options.
 */
describe('long commands over MCP on a real machine', { skip, timeout: 300_000 }, () => {
  const suite = listeningDockerSuite({ buildOptions: { toolWait: { answerDeadlineMs: DEADLINE_MS, progressIntervalMs: 500 } } });

  const jsonOf = (result: unknown) => {
    const call = result as CallToolResult;
    assert.notEqual(call.isError, true, JSON.stringify(call.content));
    return call.structuredContent as Record<string, unknown>;
  };

  test('regression: run_command of `sleep 4; echo done` answers running with its runId, and run_wait gives its outcome', async () => {
    const machine = await runningDockerMachine(suite.owner, { name: 'long-command' });

    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`/api/machines/${machine.id}/mcp`, suite.base), { requestInit: { headers: { authorization: `Bearer ${machine.mcpToken}` } } }));
    suite.clients.push(client);

    const heard: Progress[] = [];
    const answered = jsonOf(await client.callTool({ name: 'run_command', arguments: { command: 'sleep 4; echo done' } }, undefined, { onprogress: (progress) => heard.push(progress) }));
    assert.equal(answered.status, 'running');
    const runId = String(answered.runId);
    assert.match(runId, /^run_/);
    assert.ok(heard.length >= 1, 'progress while it waited');

    let outcome = answered;
    for (let tries = 0; outcome.status !== 'succeeded' && outcome.status !== 'failed' && tries < 10; tries++) {
      outcome = jsonOf(await client.callTool({ name: 'run_wait', arguments: { id: runId } }));
    }
    assert.equal(outcome.status, 'succeeded', JSON.stringify(outcome));
    assert.equal(outcome.stdout, 'done\n');
    assert.equal(outcome.exitCode, 0);
    assert.deepEqual(jsonOf(await client.callTool({ name: 'run_get', arguments: { id: runId } })), (await suite.owner.call('GET', `/api/runs/${runId}`)).json());
  });
});
