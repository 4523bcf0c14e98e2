import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { AgentClient } from '../../src/providers/agent/agent-client.ts';
import { PortClosed } from '../../src/providers/provider.ts';
import { AGENT_BINARY } from '../../src/providers/docker/agent-install.ts';

/**
 * The service's agent client against a real agent process, started directly
 * (no Docker): `agent serve` on a socket in a temporary directory, reached
 * through `agent attach`'s stdio as the Docker provider reaches it through
 * the engine's exec.
 */
describe('the machine agent, through the service’s client', { skip: existsSync(AGENT_BINARY) ? false : `no agent binary at ${AGENT_BINARY}: npm run agent` }, () => {
  let dir: string;
  let socket: string;
  let server: ChildProcess;
  const attached: ChildProcess[] = [];

  function startServer() {
    server = spawn(AGENT_BINARY, ['serve', '--socket', socket, '--records', join(dir, 'records')], { stdio: ['ignore', 'ignore', 'inherit'] });
  }

  /** A new connection, as a new service process would open one; `process` is its `attach`, to kill. */
  function connect(): { client: AgentClient; process: ChildProcess } {
    const attach = spawn(AGENT_BINARY, ['attach', '--socket', socket, '--wait-ms', '5000'], { stdio: ['pipe', 'pipe', 'inherit'] });
    attached.push(attach);
    return { client: new AgentClient(Duplex.from({ readable: attach.stdout!, writable: attach.stdin! })), process: attach };
  }

  const run = (client: AgentClient, id: string, command: string, options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}) =>
    client.run({ id, command, cwd: options.cwd ?? dir, env: options.env ?? {}, timeoutMs: options.timeoutMs ?? 60_000 }, new AbortController().signal);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-client-'));
    socket = join(dir, 'agent.sock');
    startServer();
  });

  after(async () => {
    for (const attach of attached) attach.kill('SIGKILL');
    server.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  test('health says the API version; a run answers stdout, stderr, combined output, exit code, cwd and env', async () => {
    const { client } = connect();
    const health = await client.health();
    assert.equal(health.api, 1);
    // Apart in time, so that the combined output's order is the order they were written (two pipes read at once may swap lines written together).
    const result = await run(client, 'run_basic', 'echo out; sleep 0.2; echo err >&2; sleep 0.2; pwd; echo "$GREETING"; exit 3', { cwd: '/tmp', env: { GREETING: 'hello there' } });
    assert.deepEqual(result, { exitCode: 3, timedOut: false, stdout: 'out\n/tmp\nhello there\n', stderr: 'err\n', output: 'out\nerr\n/tmp\nhello there\n', truncated: false });
    client.close();
  });

  test('a run whose client died is finished by another connection, from the same execution: it never runs twice', async () => {
    const first = connect();
    const counter = join(dir, 'executions');
    const pending = run(first.client, 'run_reattach', `echo once >> ${counter}; sleep 1; echo finished`).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    first.process.kill('SIGKILL');
    assert.ok((await pending) instanceof Error, 'the first client loses its answer with its connection');
    const second = connect();
    const result = await run(second.client, 'run_reattach', `echo once >> ${counter}`);
    assert.equal(result?.stdout, 'finished\n');
    assert.equal(result?.exitCode, 0);
    // Asked a third time, once it ended: the record answers, still without running it.
    assert.equal((await run(second.client, 'run_reattach', `echo once >> ${counter}`))?.stdout, 'finished\n');
    assert.equal(await readFile(counter, 'utf8'), 'once\n');
    second.client.close();
  });

  test('a run past its timeout is killed with everything it started', async () => {
    const { client } = connect();
    const marker = join(dir, 'survivor');
    const result = await run(client, 'run_timeout', `(sleep 2; touch ${marker}) & echo started; sleep 30`, { timeoutMs: 500 });
    assert.equal(result?.timedOut, true);
    assert.equal(result?.exitCode, null);
    assert.equal(result?.stdout, 'started\n');
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.equal(existsSync(marker), false, 'the background child was killed with its group');
    client.close();
  });

  test('an output larger than the limit is cut to 1 MiB and says so', async () => {
    const { client } = connect();
    const result = await run(client, 'run_big', 'head -c 3000000 /dev/zero | tr "\\0" a');
    assert.equal(result?.stdout.length, 1024 * 1024);
    assert.equal(result?.truncated, true);
    client.close();
  });

  test('processes: output comes to a waiting reader the moment it is written; input, signals, the list, and what survives the agent', async () => {
    const { client } = connect();
    const started = await client.startProcess({ id: 'proc_cat', command: 'cat', cwd: dir, env: {}, startedAt: Date.now() });
    assert.equal(started.status, 'running');
    const waiting = client.processOutput('proc_cat', 0, 10_000);
    const sent = performance.now();
    assert.equal(await client.processInput('proc_cat', Buffer.from('hello\n')), true);
    const output = await waiting;
    assert.ok(performance.now() - sent < 2000, 'the reader was woken, not left to its deadline');
    assert.deepEqual({ stdout: output?.stdout, offset: output?.offset, running: output?.running, dropped: output?.dropped }, { stdout: 'hello\n', offset: 6, running: true, dropped: 0 });
    assert.equal(await client.processSignal('proc_cat', 'TERM'), true);
    const ended = await client.processOutput('proc_cat', 6, 10_000);
    assert.equal(ended?.running, false);
    assert.equal(ended?.endReason, 'exited');
    assert.equal(await client.processInput('proc_cat', Buffer.from('late')), false);
    assert.equal(await client.processOutput('proc_missing', 0, 0), null);

    await client.startProcess({ id: 'proc_sleeper', command: 'echo before; sleep 600', cwd: dir, env: {}, startedAt: Date.now() });
    assert.equal((await client.processOutput('proc_sleeper', 0, 10_000))?.stdout, 'before\n');
    assert.deepEqual((await client.listProcesses()).map((process) => process.id), ['proc_cat', 'proc_sleeper']);
    // The agent itself dies: its processes are lost, their output kept.
    server.kill('SIGKILL');
    await new Promise((resolve) => server.once('exit', resolve));
    startServer();
    const again = connect();
    const sleeper = (await again.client.listProcesses()).find((process) => process.id === 'proc_sleeper');
    assert.equal(sleeper?.endReason, 'lost');
    assert.equal((await again.client.processOutput('proc_sleeper', 0, 0))?.stdout, 'before\n');
    again.client.close();
  });

  test('files: stat, list in one call, read and write as streams, append, delete', async () => {
    const { client } = connect();
    const path = join(dir, 'files', 'nested', 'note.txt');
    assert.equal(await client.write(path, Buffer.from('hello'), false), null);
    assert.equal(await client.write(path, Buffer.from(' world'), true), null);
    const read = await client.read(path);
    assert.equal(read?.type, 'file');
    const chunks: Buffer[] = [];
    if (read?.type === 'file') for await (const chunk of read.content) chunks.push(chunk as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'hello world');
    assert.deepEqual((await client.list(join(dir, 'files', 'nested')))?.map((entry) => [entry.name, entry.type, entry.size]), [['note.txt', 'file', 11]]);
    assert.deepEqual(await client.read(join(dir, 'files')), { type: 'directory' });
    assert.equal(await client.read(join(dir, 'nothing')), null);
    assert.match((await client.write(join(dir, 'files'), Buffer.from('x'), false)) ?? '', /directory/);
    assert.equal(await client.remove(join(dir, 'files'), false), 'directory');
    assert.equal(await client.remove(join(dir, 'files'), true), 'removed');
    assert.equal(await client.remove(join(dir, 'files'), true), 'missing');
    client.close();
  });

  test('a file larger than the stream window is read whole, only as fast as the reader takes it', async () => {
    const { client } = connect();
    const path = join(dir, 'big.bin');
    const bytes = Buffer.alloc(8 * 1024 * 1024, 7);
    await writeFile(path, bytes);
    const read = await client.read(path);
    assert.equal(read?.type, 'file');
    let total = 0;
    if (read?.type === 'file') {
      assert.equal(read.size, bytes.length);
      for await (const chunk of read.content) total += (chunk as Buffer).length;
    }
    assert.equal(total, bytes.length);
    client.close();
  });

  test('watch tells of a file created and written', async () => {
    const { client } = connect();
    const watched = join(dir, 'watched');
    await client.write(join(watched, 'keep'), Buffer.from(''), false);
    const stop = new AbortController();
    const changes = await client.watch(watched, false, stop.signal);
    await writeFile(join(watched, 'new.txt'), 'x');
    const seen: string[] = [];
    for await (const change of changes) {
      seen.push(`${change.type} ${change.path}`);
      if (seen.some((line) => line.endsWith('new.txt'))) break;
    }
    assert.ok(seen.some((line) => line.startsWith('create') && line.endsWith(join(watched, 'new.txt'))), seen.join(', '));
    stop.abort();
    client.close();
  });

  test('a terminal echoes what is typed and takes a new size', async () => {
    const { client } = connect();
    const terminal = await client.openTerminal({ cols: 80, rows: 24, command: '/bin/sh' });
    let screen = '';
    terminal.output.on('data', (chunk: Buffer) => (screen += chunk.toString()));
    await terminal.resize(100, 40);
    terminal.write(Buffer.from('stty size; echo done-$((6*7))\n'));
    const deadline = Date.now() + 5000;
    while (!screen.includes('done-42') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.match(screen, /40 100/);
    assert.match(screen, /done-42/);
    terminal.close();
    client.close();
  });

  test('a port is a byte stream to 127.0.0.1 in the machine; a closed port is null', async () => {
    const echo: Server = createServer((connection) => connection.pipe(connection));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const port = (echo.address() as { port: number }).port;
    const { client } = connect();
    const channel = await client.connectPort(port);
    assert.ok(channel);
    const answer = new Promise<string>((resolve) => channel.output.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    channel.write(Buffer.from('ping'));
    assert.equal(await answer, 'ping');
    channel.close();
    echo.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await client.connectPort(port), null);
    client.close();
  });

  test('a port stream takes bytes before the agent answered; a closed port destroys it with PortClosed, no byte read', async () => {
    const echo: Server = createServer((connection) => connection.pipe(connection));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const port = (echo.address() as { port: number }).port;
    const { client } = connect();
    const stream = client.portStream(port);
    stream.write('ping');
    const answer = await new Promise<string>((resolve) => stream.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    assert.equal(answer, 'ping');
    stream.destroy();
    echo.close();
    await new Promise((resolve) => setTimeout(resolve, 50));

    const closed = client.portStream(port);
    closed.write('ping');
    const read: Buffer[] = [];
    closed.on('data', (chunk: Buffer) => read.push(chunk));
    const error = await new Promise((resolve) => closed.once('error', resolve));
    assert.ok(error instanceof PortClosed, String(error));
    assert.deepEqual(read, []);
    client.close();
  });
});
