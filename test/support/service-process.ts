import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url));

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote to stderr, for failure messages. */
  stderr(): string;
  /** Its log (stdout), for failure messages. */
  stdout(): string;
  kill(signal: NodeJS.Signals): Promise<number | null>;
}

/**
 * The real service, `node src/server.ts`, as a child process; resolves once /healthz answers.
 * `wrap`: a command the service runs under (`unshare …`), whose killing kills the service.
 */
export async function startServiceProcess(env: Record<string, string>, { wrap = [] }: { wrap?: string[] } = {}): Promise<ServiceProcess> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const url = `http://127.0.0.1:${port}`;
  const [command, ...args] = [...wrap, process.execPath, SERVER];
  const child = spawn(command!, args, {
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: url, LOG_LEVEL: 'warn', BILLING: 'off', MACHINE_PROVIDER: 'simulated', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // As long as a start-up may take (src/app.ts PLUGIN_START_MS): a busy engine slows the machines plugin's.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}: ${stderr}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`service did not start: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url,
    child,
    stderr: () => stderr,
    stdout: () => stdout,
    kill: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
