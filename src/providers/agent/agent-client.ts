import http2 from 'node:http2';
import { PassThrough, pipeline, Readable, type Duplex, type Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { PortClosed, type CommandResult, type FileEntry, type MetricSample, type ProcessInfo, type ProcessOutput, type ProcessSignal } from '../provider.ts';

/** The agent API's major version this service speaks (agent/API.md). */
export const AGENT_API = 1;
/** At most this much of a run's stdout, of its stderr and of its combined output is kept. */
export const RUN_OUTPUT_LIMIT = 1024 * 1024;
/** At most this much of a process's output per read; the next read goes on from its offset. */
export const OUTPUT_READ_LIMIT = 1024 * 1024;
/**
 * What the agent may send on one request before the service reads it: a file
 * read or a port relay never holds more than this in the service's memory,
 * however fast the machine sends.
 */
const STREAM_WINDOW = 1024 * 1024;
/**
 * What the agent may send on all requests at once before the service says it
 * read some. HTTP/2's default, 64 KiB, lets a single port relay or file read
 * have only two of the agent's 32 KiB writes on the way: the agent then waits
 * for a WINDOW_UPDATE from the service's event loop every 32 KiB, and both
 * sides pay for many small reads and writes (bench/RESULTS.md, 2026-12-07
 * (eighth)). Node reads the connection's window back as bytes arrive; what a
 * slow reader holds is bounded by STREAM_WINDOW per request.
 */
const CONNECTION_WINDOW = 8 * STREAM_WINDOW;

/** The agent answered with an error (agent/API.md: `{error, message}`). */
export class AgentError extends Error {
  override name = 'AgentError';
  readonly status: number;
  readonly code: string;
  readonly detail: Record<string, unknown>;
  constructor(status: number, code: string, message: string, detail: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** The agent cannot be spoken to (gone, or a version this service does not speak). */
export class AgentUnavailable extends Error {
  override name = 'AgentUnavailable';
}

export interface AgentHealth {
  version: string;
  api: number;
  bootId: string;
  /** The machine's hostname: who answered, when the socket was reached from the host (agent/API.md). */
  hostname: string;
  pid: number;
  startedAt: number;
}

/** A run's outcome as the agent tells it; null for `unknown` (the machine cannot say). */
export type AgentRunResult = CommandResult | null;

/** Bytes as text: invalid UTF-8 and a character cut by the limit become U+FFFD; NUL too (PostgreSQL text refuses it). */
export function outputText(bytes: Buffer): string {
  return new StringDecoder('utf8').end(bytes).replaceAll('\u0000', '\uFFFD');
}

const fromBase64 = (text: unknown): Buffer => Buffer.from(typeof text === 'string' ? text : '', 'base64');

/** A run's result line (or record) as the service's CommandResult: each text cut to RUN_OUTPUT_LIMIT. */
export function commandResultOf(result: {
  status: string;
  exitCode: number | null;
  stdout: Buffer;
  stderr: Buffer;
  output: Buffer;
  stdoutBytes: number;
  stderrBytes: number;
  outputBytes: number;
}): AgentRunResult {
  if (result.status === 'unknown') return null;
  const cut = (bytes: Buffer) => outputText(bytes.subarray(0, RUN_OUTPUT_LIMIT));
  const timedOut = result.status === 'timeout';
  return {
    exitCode: timedOut ? null : result.exitCode,
    timedOut,
    stdout: cut(result.stdout),
    stderr: cut(result.stderr),
    output: cut(result.output),
    truncated: [result.stdoutBytes, result.stderrBytes, result.outputBytes].some((size) => size > RUN_OUTPUT_LIMIT),
  };
}

/** A byte stream both ways inside the machine (a terminal, a port). */
export interface AgentChannel {
  output: Readable;
  /** The way in, for writers that keep to its backpressure (`write` answers false when it is full). */
  input: Writable;
  write(chunk: Buffer): void;
  close(): void;
}

export interface AgentTerminal extends AgentChannel {
  id: string;
  resize(cols: number, rows: number): Promise<void>;
}

export interface FileChange {
  type: 'create' | 'write' | 'remove' | 'rename' | 'chmod';
  path: string;
  at: number;
}

interface Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Readable;
  /** Ends the request both ways (a channel closed early). */
  cancel(): void;
}

/**
 * A client of one machine's agent (agent/API.md), over any byte stream that
 * reaches it (the engine's exec of `agent attach`, or a process's stdio in
 * tests): HTTP/2 with prior knowledge, every operation a stream of its own on
 * one connection. `closed` settles when the stream ends.
 */
export class AgentClient {
  readonly #session: http2.ClientHttp2Session;
  /** Requests not yet closed: while there are any, the connection keeps the process up. */
  #inFlight = 0;
  readonly closed: Promise<void>;

  constructor(stream: Duplex) {
    this.#session = http2.connect('http://machine-agent', {
      createConnection: () => stream,
      // Frames as large as the agent's writes (32 KiB): half as many chunks for a stream's bytes to go through.
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false, maxFrameSize: 64 * 1024 },
    });
    this.#session.on('error', () => {});
    this.#session.once('connect', () => this.#session.setLocalWindowSize(CONNECTION_WINDOW));
    // A stream that ends one way (the machine stopped, the exec died) is the end of the connection: HTTP/2 over a
    // half-open stream would otherwise wait for it, and so would every request on it.
    const end = () => this.#session.destroy();
    stream.once('end', end);
    stream.once('close', end);
    stream.once('error', end);
    this.closed = new Promise((resolve) => this.#session.once('close', resolve));
    // Idle, never the reason a process stays up: the connection lives as long as the machine's exec.
    this.#session.unref();
  }

  get isOpen(): boolean {
    return !this.#session.closed && !this.#session.destroyed;
  }

  close(): void {
    this.#session.destroy();
  }

  /** While a request is open, the connection keeps the process up. */
  #keepUpWhileOpen(request: http2.ClientHttp2Stream): void {
    if (this.#inFlight++ === 0) this.#session.ref();
    request.once('close', () => {
      if (--this.#inFlight === 0 && !this.#session.destroyed) this.#session.unref();
    });
  }

  /** Sends a request; answers once the agent's headers came (its body still streaming). */
  #request(method: string, path: string, body?: Buffer | Readable | null, options: { signal?: AbortSignal; contentType?: string } = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (!this.isOpen) {
        reject(new AgentUnavailable('the connection to the machine agent is closed'));
        return;
      }
      const headers: http2.OutgoingHttpHeaders = { ':method': method, ':path': path };
      if (body !== undefined && body !== null) headers['content-type'] = options.contentType ?? (Buffer.isBuffer(body) ? 'application/json' : 'application/octet-stream');
      let request: http2.ClientHttp2Stream;
      try {
        request = this.#session.request(headers, { endStream: body === undefined || body === null, ...(options.signal ? { signal: options.signal } : {}) });
      } catch (error) {
        reject(new AgentUnavailable(`the machine agent cannot be reached: ${(error as Error).message}`));
        return;
      }
      this.#keepUpWhileOpen(request);
      request.once('response', (responseHeaders) => {
        // Read from now on: an HTTP/2 stream that the agent ends at once may close before a later reader attaches,
        // and its buffered body would be lost to it. The pipe still reads only as fast as the reader does.
        const body = new PassThrough();
        pipeline(request, body, () => {});
        resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, body, cancel: () => request.destroy() });
      });
      request.once('error', (error: Error & { code?: string }) =>
        reject(options.signal?.aborted ? options.signal.reason : error.code === 'ABORT_ERR' ? error : new AgentUnavailable(`the machine agent went away: ${error.message}`)),
      );
      request.once('close', () => reject(new AgentUnavailable('the machine agent closed the request')));
      if (Buffer.isBuffer(body)) request.end(body);
      else if (body) body.pipe(request);
    });
  }

  /** A JSON request whose answer is JSON; 4xx and 5xx become AgentError. */
  async #json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const answer = await this.#request(method, path, body === undefined ? undefined : Buffer.from(JSON.stringify(body)), signal ? { signal } : {});
    const text = await readAll(answer.body);
    if (answer.status >= 400) throw errorOf(answer.status, text);
    return (text.length === 0 ? undefined : JSON.parse(text.toString('utf8'))) as T;
  }

  async #ok(answer: Answer): Promise<Answer> {
    if (answer.status < 400) return answer;
    throw errorOf(answer.status, await readAll(answer.body));
  }

  health(): Promise<AgentHealth> {
    return this.#json('GET', '/v1/health');
  }

  /**
   * Runs a command once under its id (or attaches to it, or reads its record)
   * and answers its outcome; `onOutput` is told of output as it comes.
   * `signal` stops the waiting, never the command.
   */
  async run(run: { id: string; command: string; cwd: string | null; env: Record<string, string>; timeoutMs: number }, signal: AbortSignal, onOutput?: (stream: 'stdout' | 'stderr', data: Buffer) => void): Promise<AgentRunResult> {
    const body = Buffer.from(JSON.stringify({ id: run.id, command: run.command, cwd: run.cwd, env: run.env, timeoutMs: run.timeoutMs }));
    try {
      return await this.#runAnswer(await this.#ok(await this.#request('POST', `/v1/runs${onOutput ? '?follow=1' : ''}`, body, { signal })), onOutput);
    } catch (error) {
      throw signal.aborted ? signal.reason : error;
    }
  }

  async #runAnswer(answer: Answer, onOutput?: (stream: 'stdout' | 'stderr', data: Buffer) => void): Promise<AgentRunResult> {
    for await (const line of ndjson(answer.body)) {
      if (line.type === 'stdout' || line.type === 'stderr') onOutput?.(line.type, fromBase64(line.data));
      if (line.type !== 'result') continue;
      return commandResultOf({
        status: String(line.status),
        exitCode: typeof line.exitCode === 'number' ? line.exitCode : null,
        stdout: fromBase64(line.stdout),
        stderr: fromBase64(line.stderr),
        output: fromBase64(line.output),
        stdoutBytes: Number(line.stdoutBytes),
        stderrBytes: Number(line.stderrBytes),
        outputBytes: Number(line.outputBytes),
      });
    }
    throw new AgentUnavailable('the connection to the machine agent ended before the run’s result came');
  }

  startProcess(process: { id: string; command: string; cwd: string | null; env: Record<string, string>; startedAt: number }): Promise<ProcessInfo> {
    return this.#json('POST', '/v1/processes', process);
  }

  async listProcesses(): Promise<ProcessInfo[]> {
    return (await this.#json<{ data: ProcessInfo[] }>('GET', '/v1/processes')).data;
  }

  /** Output past `offset` (waiting up to `waitMs` for some); null for an unknown process. */
  async processOutput(id: string, offset: number, waitMs: number, signal?: AbortSignal): Promise<ProcessOutput | null> {
    const query = new URLSearchParams({ offset: String(offset), waitMs: String(waitMs), limit: String(OUTPUT_READ_LIMIT) });
    const answer = await unless(this.#json<ProcessOutput>('GET', `/v1/processes/${encodeURIComponent(id)}/output?${query}`, undefined, signal), { 404: null });
    return answer && { ...answer, stdout: outputText(fromBase64(answer.stdout)), stderr: outputText(fromBase64(answer.stderr)) };
  }

  /** False when the process is unknown or no longer runs. */
  async processInput(id: string, data: Buffer): Promise<boolean> {
    const answer = await this.#request('POST', `/v1/processes/${encodeURIComponent(id)}/stdin`, data, { contentType: 'application/octet-stream' });
    const text = await readAll(answer.body);
    if (answer.status === 404 || answer.status === 409) return false;
    if (answer.status >= 400) throw errorOf(answer.status, text);
    return true;
  }

  async processSignal(id: string, signal: ProcessSignal): Promise<boolean> {
    const sent = this.#json('POST', `/v1/processes/${encodeURIComponent(id)}/signal`, { signal }).then(() => true);
    return unless(sent, { 404: false, 409: false });
  }

  /** A directory's entries; null when the path is not a directory or is missing. */
  async list(path: string): Promise<FileEntry[] | null> {
    const listed = this.#json<{ data: FileEntry[] }>('GET', `/v1/files/list?${new URLSearchParams({ path })}`).then((answer) => answer.data);
    return unless(listed, { 404: null, 409: null });
  }

  /** A file's bytes as they come; what else is there when it is not a file; null when nothing is. */
  async read(path: string): Promise<{ type: 'file'; size: number; content: Readable } | { type: 'directory' | 'other' } | null> {
    const answer = await this.#request('GET', `/v1/files/content?${new URLSearchParams({ path })}`);
    if (answer.status === 200) return { type: 'file', size: Number(answer.headers['content-length'] ?? 0), content: answer.body };
    const error = errorOf(answer.status, await readAll(answer.body));
    if (answer.status === 404) return null;
    if (answer.status === 409) return { type: error.detail.type === 'directory' ? 'directory' : 'other' };
    throw error;
  }

  /** Writes (or appends) a file, creating its parents; null when done, else why not. */
  async write(path: string, content: Buffer | Readable, append: boolean): Promise<string | null> {
    const answer = await this.#request('PUT', `/v1/files/content?${new URLSearchParams({ path, append: append ? '1' : '0' })}`, content, { contentType: 'application/octet-stream' });
    const text = await readAll(answer.body);
    if (answer.status < 400) return null;
    const error = errorOf(answer.status, text);
    if (answer.status === 409 || answer.status === 400) return error.message;
    throw error;
  }

  async remove(path: string, recursive: boolean): Promise<'removed' | 'missing' | 'directory'> {
    try {
      await this.#json('DELETE', `/v1/files?${new URLSearchParams({ path, recursive: recursive ? '1' : '0' })}`);
      return 'removed';
    } catch (error) {
      if (error instanceof AgentError && error.status === 404) return 'missing';
      if (error instanceof AgentError && error.status === 409) return 'directory';
      throw error;
    }
  }

  /** Changes under a path as they happen, from the moment this answers; ends with the signal. */
  async watch(path: string, recursive: boolean, signal: AbortSignal): Promise<AsyncIterable<FileChange>> {
    const answer = await this.#ok(await this.#request('GET', `/v1/files/watch?${new URLSearchParams({ path, recursive: recursive ? '1' : '0' })}`, undefined, { signal }));
    const lines = ndjson(answer.body)[Symbol.asyncIterator]();
    const first = await lines.next();
    if (first.done || first.value.type !== 'ready') throw new AgentUnavailable('the machine agent did not start the watch');
    return {
      async *[Symbol.asyncIterator]() {
        for (;;) {
          const next = await lines.next();
          if (next.done) return;
          yield next.value as unknown as FileChange;
        }
      },
    };
  }

  /** A PTY running the machine's shell (or `command`): its output, its input, its size. */
  async openTerminal(options: { cols: number; rows: number; command?: string; cwd?: string }): Promise<AgentTerminal> {
    const query = new URLSearchParams({ cols: String(options.cols), rows: String(options.rows), ...(options.command ? { command: options.command } : {}), ...(options.cwd ? { cwd: options.cwd } : {}) });
    const input = new PassThrough();
    const answer = await this.#ok(await this.#request('POST', `/v1/terminals?${query}`, input, { contentType: 'application/octet-stream' }));
    const id = String(answer.headers['x-terminal-id']);
    return {
      id,
      ...channelOf(answer, input),
      resize: async (cols, rows) => void (await this.#json('POST', `/v1/terminals/${encodeURIComponent(id)}/resize`, { cols, rows })),
    };
  }

  /** A byte stream to 127.0.0.1:<port> inside the machine; null when nothing listens there. */
  async connectPort(port: number): Promise<AgentChannel | null> {
    const input = new PassThrough();
    const answer = await this.#request('POST', `/v1/ports/${port}/connect`, input, { contentType: 'application/octet-stream' });
    if (answer.status === 502) {
      input.destroy();
      await readAll(answer.body);
      return null;
    }
    return channelOf(await this.#ok(answer), input);
  }

  /**
   * A byte stream to 127.0.0.1:<port> inside the machine, as the agent's
   * HTTP/2 stream itself (nothing copies its chunks on the way): writable at
   * once, so what is written first goes with the stream's opening instead of
   * after the agent's answer. Paused until the agent said the port answered,
   * then flowing: attach its reader at once (in this turn of the event loop).
   * Destroyed with PortClosed when nothing listens there, the agent's error
   * body never read as the port's bytes.
   * @throws AgentUnavailable when the connection to the agent is closed
   */
  portStream(port: number): Duplex {
    if (!this.isOpen) throw new AgentUnavailable('the connection to the machine agent is closed');
    let stream: http2.ClientHttp2Stream;
    try {
      stream = this.#session.request({ ':method': 'POST', ':path': `/v1/ports/${port}/connect`, 'content-type': 'application/octet-stream' });
    } catch (error) {
      throw new AgentUnavailable(`the machine agent cannot be reached: ${(error as Error).message}`);
    }
    this.#keepUpWhileOpen(stream);
    // The answer's body may be read before 'response' is emitted: nothing flows until the answer was seen.
    stream.pause();
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status === 200) stream.resume();
      else if (status === 502) stream.destroy(new PortClosed(port));
      else stream.destroy(new AgentError(status, 'internal', `the machine agent answered ${status} to a port's connection`));
    });
    return stream;
  }

  /** The samples the agent kept of the machine's use of resources, taken after `sinceMs`; empty from an agent older than them (404). */
  async metrics(sinceMs: number): Promise<MetricSample[]> {
    const answer = this.#json<{ data: MetricSample[] }>('GET', `/v1/metrics?${new URLSearchParams({ since: String(sinceMs) })}`).then((body) => body.data);
    return unless(answer, { 404: [] });
  }

  /** A short program, waited for (the screen's tools). */
  async exec(argv: string[], options: { stdin?: Buffer; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<{ exitCode: number; stdout: Buffer; stderr: Buffer }> {
    const answer = await this.#json<{ exitCode: number; stdout: string; stderr: string }>('POST', '/v1/exec', {
      argv,
      ...(options.stdin ? { stdin: options.stdin.toString('base64') } : {}),
      ...(options.env ? { env: options.env } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    });
    return { exitCode: answer.exitCode, stdout: fromBase64(answer.stdout), stderr: fromBase64(answer.stderr) };
  }
}

/** The request's answer, or the value given for the status of the agent's refusal (a 404 as null, say). */
async function unless<T, F>(request: Promise<T>, byStatus: Record<number, F>): Promise<T | F> {
  try {
    return await request;
  } catch (error) {
    if (error instanceof AgentError && error.status in byStatus) return byStatus[error.status]!;
    throw error;
  }
}

function channelOf(answer: Answer, input: PassThrough): AgentChannel {
  return {
    output: answer.body,
    input,
    write: (chunk) => void input.write(chunk),
    close: () => {
      input.end();
      answer.cancel();
    },
  };
}

function errorOf(status: number, body: Buffer): AgentError {
  try {
    const { error, message, ...detail } = JSON.parse(body.toString('utf8')) as { error?: string; message?: string };
    return new AgentError(status, error ?? 'internal', message ?? `the machine agent answered ${status}`, detail);
  } catch {
    return new AgentError(status, 'internal', `the machine agent answered ${status}: ${body.toString('utf8').slice(0, 200)}`);
  }
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** One JSON object per line, as the lines come. */
async function* ndjson(stream: Readable): AsyncGenerator<Record<string, unknown>> {
  let pending = '';
  const decoder = new StringDecoder('utf8');
  for await (const chunk of stream) {
    pending += decoder.write(chunk as Buffer);
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      if (line.trim() !== '') yield JSON.parse(line) as Record<string, unknown>;
    }
  }
  if (pending.trim() !== '') yield JSON.parse(pending) as Record<string, unknown>;
}
