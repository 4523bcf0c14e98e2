import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { listeningMachineSuite, newOwner, runningMachine, type CreatedMachine, type Owner } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';

/** The answer deadline these tests give the tools (50 s in production): a `sleep 4` outlasts it, an `exit 3` does not. */
const DEADLINE_MS = 1500;
const PROGRESS_INTERVAL_MS = 200;
/** The jobs' grace at close: the runs these tests leave running are let go after it (they go on in the machine). */
const ENV = { WEBHOOK_TIMEOUT_MS: '1000' };

type Json = Record<string, unknown>;

function jsonOf(result: unknown): Json {
  const call = result as CallToolResult;
  assert.notEqual(call.isError, true, JSON.stringify(call.content));
  return call.structuredContent as Json;
}

function errorCodeOf(result: unknown): string {
  const call = result as CallToolResult;
  assert.equal(call.isError, true, JSON.stringify(call));
  const error = (call.structuredContent as { error?: { code: string } } | undefined)?.error;
  return error?.code ?? (call.content[0] as { text: string }).text;
}

/** Issue 38.2: a command longer than the SDK client's 60 s request timeout was lost to an MCP client, with no run id and no tool to read the run. */
describe('long runs over MCP: the tools answer before the deadline, run_get and run_wait read on', () => {
  const suite = listeningMachineSuite({ env: ENV, buildOptions: { toolWait: { answerDeadlineMs: DEADLINE_MS, progressIntervalMs: PROGRESS_INTERVAL_MS } } });
  let machine: CreatedMachine;
  let other: CreatedMachine;
  let stranger: Owner;
  let strangersMachine: CreatedMachine;

  before(async () => {
    stranger = await newOwner(suite.ctx);
    // All booted here: a boot drains the job queue, which would wait for the long runs the tests leave running.
    machine = await runningMachine(suite.ctx, suite.owner, { name: 'long-runner' });
    other = await runningMachine(suite.ctx, suite.owner, { name: 'other-box' });
    strangersMachine = await runningMachine(suite.ctx, stranger, { name: 'not-yours' });
  });

  /** The official SDK client with its default options (a 60 s request timeout). */
  async function connect(path: string, token: string): Promise<Client> {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(path, suite.base), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    suite.clients.push(client);
    return client;
  }

  const runOverHttp = async (id: string): Promise<Json> => (await suite.owner.call('GET', `/api/runs/${id}`)).json();

  test('regression: run_command of a command longer than the deadline answers the run still running with its runId; run_wait gives the outcome', async () => {
    const client = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken);
    const answered = jsonOf(await client.callTool({ name: 'run_command', arguments: { command: 'sleep 4; echo done' } }));
    assert.equal(answered.status, 'running');
    assert.match(String(answered.runId), /^run_/);
    const runId = String(answered.runId);
    assert.equal(answered.id, runId);
    assert.deepEqual(answered, { ...(await runOverHttp(runId)), runId }, 'the run as GET /api/runs/{id} shows it, plus runId');

    assert.deepEqual(jsonOf(await client.callTool({ name: 'run_get', arguments: { id: runId } })), await runOverHttp(runId));
    let outcome = jsonOf(await client.callTool({ name: 'run_wait', arguments: { id: runId } }));
    for (let tries = 0; outcome.status === 'running' && tries < 10; tries++) {
      assert.equal(outcome.runId, runId, 'a wait that ends first answers the run as it is, with its runId');
      outcome = jsonOf(await client.callTool({ name: 'run_wait', arguments: { id: runId, waitMs: 50_000 } }));
    }
    assert.equal(outcome.status, 'succeeded');
    assert.equal(outcome.output, 'sleep 4; echo done');
    assert.equal('runId' in outcome, false, 'a finished run is the run itself');
    assert.deepEqual(outcome, await runOverHttp(runId));
    assert.deepEqual(jsonOf(await client.callTool({ name: 'run_get', arguments: { id: runId } })), outcome);

    const short = jsonOf(await client.callTool({ name: 'run_command', arguments: { command: 'exit 3' } }));
    assert.equal(short.status, 'failed', 'a command within the deadline is answered finished, with no runId');
    assert.equal(short.exitCode, 3);
    assert.deepEqual(short, await runOverHttp(String(short.id)));
  });

  test('machine_run_command on the platform endpoint answers before the SDK times out, and machine_run_get / machine_run_wait read the run', async () => {
    const client = await connect('/api/mcp', suite.owner.key);
    // Before the fix the tool waited for a 70 s run: with a timeout just past the deadline the SDK gave up (-32001) before any answer.
    const answered = jsonOf(await client.callTool({ name: 'machine_run_command', arguments: { id: machine.id, command: 'sleep 70; echo done' } }, undefined, { timeout: DEADLINE_MS + 3000 }));
    assert.equal(answered.status, 'running');
    const runId = String(answered.runId);
    assert.equal(answered.machineId, machine.id);
    assert.deepEqual(jsonOf(await client.callTool({ name: 'machine_run_get', arguments: { id: runId } })), await runOverHttp(runId));
    const waited = jsonOf(await client.callTool({ name: 'machine_run_wait', arguments: { id: runId, waitMs: 100 } }, undefined, { timeout: DEADLINE_MS + 3000 }));
    assert.deepEqual(waited, { ...(await runOverHttp(runId)), runId });

    const finished = jsonOf(await client.callTool({ name: 'machine_run_command', arguments: { id: machine.id, command: 'true' } }));
    assert.equal(finished.status, 'succeeded');
    assert.deepEqual(jsonOf(await client.callTool({ name: 'machine_run_wait', arguments: { id: String(finished.id) } })), finished, 'a finished run is answered at once');
  });

  test("the machine's endpoint reads only that machine's runs; the platform's only the account's; waitMs is at most 50,000", async () => {
    const otherRun = jsonOf(await (await connect(`/api/machines/${other.id}/mcp`, other.mcpToken)).callTool({ name: 'run_command', arguments: { command: 'ls' } }));
    const strangersRun = jsonOf(await (await connect(`/api/machines/${strangersMachine.id}/mcp`, strangersMachine.mcpToken)).callTool({ name: 'run_command', arguments: { command: 'ls' } }));

    for (const token of [machine.mcpToken, suite.owner.key]) {
      const client = await connect(`/api/machines/${machine.id}/mcp`, token);
      for (const id of [String(otherRun.id), String(strangersRun.id), 'run_01jzzzzzzzzzzzzzzzzzzzzzzz']) {
        assert.equal(errorCodeOf(await client.callTool({ name: 'run_get', arguments: { id } })), 'not_found', id);
        assert.equal(errorCodeOf(await client.callTool({ name: 'run_wait', arguments: { id } })), 'not_found', id);
      }
      for (const args of [{ id: String(otherRun.id), waitMs: 50_001 }, { id: String(otherRun.id), waitMs: -1 }, { id: 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz' }, { id: String(otherRun.id), extra: 1 }]) {
        assert.match(errorCodeOf(await client.callTool({ name: 'run_wait', arguments: args })), /Input validation error/, JSON.stringify(args));
      }
    }

    const platform = await connect('/api/mcp', suite.owner.key);
    assert.equal(jsonOf(await platform.callTool({ name: 'machine_run_get', arguments: { id: String(otherRun.id) } })).machineId, other.id, "any of the account's machines");
    assert.equal(errorCodeOf(await platform.callTool({ name: 'machine_run_get', arguments: { id: String(strangersRun.id) } })), 'not_found');
    assert.equal(errorCodeOf(await platform.callTool({ name: 'machine_run_wait', arguments: { id: String(strangersRun.id) } })), 'not_found');
    assert.match(errorCodeOf(await platform.callTool({ name: 'machine_run_wait', arguments: { id: String(otherRun.id), waitMs: 50_001 } })), /Input validation error/);

    const tools = (await platform.listTools()).tools;
    const wait = tools.find((tool) => tool.name === 'machine_run_wait')!;
    assert.deepEqual(wait.inputSchema.required, ['id']);
    assert.equal((wait.inputSchema.properties as { waitMs: { maximum: number } }).waitMs.maximum, 50_000);
  });

  test('progress notifications reach a client that asks for them, on the 2025 transport (SSE) and on 2026-07-28', async () => {
    const legacy = await connect(`/api/machines/${machine.id}/mcp`, machine.mcpToken);
    const heard: Progress[] = [];
    const answered = jsonOf(await legacy.callTool({ name: 'run_command', arguments: { command: 'sleep 3' } }, undefined, { onprogress: (progress) => heard.push(progress) }));
    assert.equal(answered.status, 'running');
    assert.ok(heard.length >= 2, `${heard.length} notifications`);
    for (let i = 1; i < heard.length; i++) assert.ok(heard[i]!.progress > heard[i - 1]!.progress, 'progress only grows');
    assert.match(String(heard[0]!.message), /Still waiting/);

    const heardOnWait: Progress[] = [];
    const finished = jsonOf(await legacy.callTool({ name: 'run_wait', arguments: { id: String(answered.runId) } }, undefined, { onprogress: (progress) => heardOnWait.push(progress) }));
    assert.ok(heardOnWait.length >= 1 || finished.status === 'succeeded', 'run_wait reports progress too');

    const modern = new ModernClient({ name: 'modern-agent', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await modern.connect(new ModernTransport(new URL('/api/mcp', suite.base), { requestInit: { headers: { authorization: `Bearer ${suite.owner.key}` } } }));
    suite.clients.push(modern);
    const heardModern: unknown[] = [];
    const result = await modern.callTool({ name: 'machine_run_command', arguments: { id: machine.id, command: 'sleep 3' } }, { onprogress: (progress) => heardModern.push(progress) });
    assert.equal((result.structuredContent as Json).status, 'running');
    assert.ok(heardModern.length >= 2, `${heardModern.length} notifications`);

    const quiet = jsonOf(await legacy.callTool({ name: 'run_command', arguments: { command: 'true' } }, undefined, { onprogress: () => assert.fail('no progress for a run that ends at once') }));
    assert.equal(quiet.status, 'succeeded');
  });
});

describe('a client that goes away ends the wait', () => {
  // A deadline far past the test's own timeout: only the client's going away can end these waits in time.
  const suite = listeningMachineSuite({ env: ENV, buildOptions: { toolWait: { answerDeadlineMs: 600_000, progressIntervalMs: PROGRESS_INTERVAL_MS } } });
  let machine: CreatedMachine;
  /** Waits on runs in progress: each wait subscribes to the run's signal until it ends. */
  let waits = 0;

  before(async () => {
    machine = await runningMachine(suite.ctx, suite.owner, { name: 'abandoned' });
    const { signals } = suite.ctx.app.deps;
    const subscribe = signals.subscribe.bind(signals);
    signals.subscribe = (listener) => {
      waits += 1;
      const unsubscribe = subscribe(listener);
      let done = false;
      return () => {
        if (!done) waits -= 1;
        done = true;
        unsubscribe();
      };
    };
  });

  for (const progress of [false, true]) {
    test(`closing the connection mid-wait ends the tool's wait (${progress ? 'SSE, with progress' : 'JSON'})`, { timeout: 30_000 }, async () => {
      const client = new Client({ name: 'leaving-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`/api/machines/${machine.id}/mcp`, suite.base), { requestInit: { headers: { authorization: `Bearer ${machine.mcpToken}` } } }));
      const before = waits;
      const call = client.callTool({ name: 'run_command', arguments: { command: 'sleep 600' } }, undefined, progress ? { onprogress: () => {} } : {});
      call.catch(() => {});
      await eventually(() => (waits > before ? true : undefined), 10_000, 'the tool waiting on its run');
      await client.close();
      await eventually(() => (waits === before ? true : undefined), 10_000, 'the wait to end with the connection');
      const runs = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data as Json[];
      assert.equal(runs[0]!.status, 'running', 'the run itself goes on');
    });
  }
});
