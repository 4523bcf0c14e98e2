import { PassThrough, type Readable } from 'node:stream';
import type Docker from 'dockerode';

export interface ExecOptions {
  env?: Record<string, string>;
  /** Absolute; the container's working directory when absent. */
  cwd?: string;
  /** Written to the process's stdin, which is then closed. */
  stdin?: Buffer;
  /** Stops waiting (rejecting with its reason); the process goes on in the machine. */
  signal?: AbortSignal;
  /** Ask the engine for the exit code (one more round trip). */
  exitCode?: boolean;
}

export interface ExecResult {
  stdout: Buffer;
  stderr: Buffer;
  /** Null unless asked for. */
  exitCode: number | null;
}

/** What a machine's processes get besides what a caller asks for: the screen (CONTRACT 16) and a usable PATH. */
export const MACHINE_ENV: Record<string, string> = {
  DISPLAY: ':1',
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
};

function envList(env: Record<string, string>): string[] {
  return Object.entries({ ...MACHINE_ENV, ...env }).map(([name, value]) => `${name}=${value}`);
}

/** A process in a machine spoken to as a stream: what it writes to stdout, and its stdin. */
export interface ExecDuplex {
  output: Readable;
  write(chunk: Buffer): void;
  /** Ends it: its stdin closes (a well-behaved process exits) and the connection goes. */
  close(): void;
}

/**
 * Runs `cmd` in a running container as root with its stdin and stdout joined
 * to the caller (a protocol spoken over stdio, like a VNC server's `-inetd`
 * mode). Its stderr is dropped.
 * @throws the engine's error (the container is not running, say).
 */
export async function execDuplex(container: Docker.Container, cmd: string[]): Promise<ExecDuplex> {
  const exec = await container.exec({ Cmd: cmd, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, User: 'root', Env: envList({}) });
  const stream = (await exec.start({ hijack: true, stdin: true, Detach: false, Tty: false })) as NodeJS.ReadWriteStream & { destroy(): void };
  const output = new PassThrough();
  demultiplex(stream, { push: (chunk: Buffer) => output.write(chunk) }, { push: () => 0 });
  stream.once('end', () => output.end());
  stream.once('close', () => output.end());
  stream.once('error', (error: Error) => output.destroy(error));
  return {
    output,
    write: (chunk) => void stream.write(chunk),
    close: () => {
      stream.end();
      stream.destroy();
    },
  };
}

/**
 * Runs `cmd` in a running container as root (the engine's exec) and answers
 * its stdout as a stream, as it comes (a file being read, say), once the
 * engine has started it. Its stderr is dropped.
 * @throws the engine's error (the container is not running, say).
 */
export async function execStream(container: Docker.Container, cmd: string[], options: Pick<ExecOptions, 'env' | 'cwd'> = {}): Promise<Readable> {
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false, User: 'root', Env: envList(options.env ?? {}), ...(options.cwd ? { WorkingDir: options.cwd } : {}) });
  const stream = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false });
  const stdout = new PassThrough();
  // The engine is read only as fast as the reader takes it in.
  const push = (chunk: Buffer) => {
    if (stdout.write(chunk)) return;
    stream.pause();
    stdout.once('drain', () => stream.resume());
  };
  demultiplex(stream, { push }, { push: () => 0 });
  stream.once('end', () => stdout.end());
  stream.once('close', () => stdout.end());
  stream.once('error', (error: Error) => stdout.destroy(error));
  // A reader that stops early (a client that went away) ends the exec's stream too.
  stdout.once('close', () => stream.destroy());
  return stdout;
}

/**
 * Runs `cmd` in a running container as root (the engine's exec), and collects
 * what it writes until it closes its output.
 * @throws the engine's error (the container is not running, say), or the signal's reason.
 */
export async function execIn(container: Docker.Container, cmd: string[], options: ExecOptions = {}): Promise<ExecResult> {
  const { signal } = options;
  signal?.throwIfAborted();
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdin: options.stdin !== undefined,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: 'root',
    Env: envList(options.env ?? {}),
    ...(options.cwd === undefined ? {} : { WorkingDir: options.cwd }),
  });
  const stream = await exec.start({ hijack: true, stdin: options.stdin !== undefined, Detach: false, Tty: false });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    const aborted = () => {
      stream.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', aborted, { once: true });
    const finish = (error?: Error) => {
      signal?.removeEventListener('abort', aborted);
      if (error) reject(error);
      else resolve();
    };
    demultiplex(stream, stdout, stderr);
    stream.once('end', () => finish());
    stream.once('close', () => finish());
    stream.once('error', finish);
    if (options.stdin !== undefined) stream.end(options.stdin);
  });
  const exitCode = options.exitCode ? ((await exec.inspect()).ExitCode ?? null) : null;
  return { stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr), exitCode };
}

/**
 * The engine's multiplexed stream without a TTY: frames of an 8-byte header
 * (stream 1 stdout, 2 stderr; big-endian length at byte 4) and their bytes.
 */
function demultiplex(stream: NodeJS.ReadableStream, stdout: { push(chunk: Buffer): unknown }, stderr: { push(chunk: Buffer): unknown }): void {
  let pending: Buffer = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 8) {
      const length = pending.readUInt32BE(4);
      if (pending.length < 8 + length) break;
      (pending[0] === 2 ? stderr : stdout).push(pending.subarray(8, 8 + length));
      pending = pending.subarray(8 + length);
    }
  });
}
