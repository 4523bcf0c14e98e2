import { access } from 'node:fs/promises';
import { createConnection, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { setTimeout } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type Docker from 'dockerode';
import { AGENT_API, AgentClient, AgentUnavailable } from '../agent/agent-client.ts';
import { AGENT_PATH, AGENT_SOCKET } from './container-spec.ts';

/** How long a just-started machine's agent may take to listen. */
const ATTACH_WAIT_MS = 10_000;

/**
 * The stdio of one engine exec as a byte stream: what is written goes to the
 * process's stdin, what it writes to stdout is read (the engine frames stdout
 * and stderr on one connection; stderr is dropped).
 */
async function execConnection(container: Docker.Container, cmd: string[]): Promise<Duplex> {
  const exec = await container.exec({ Cmd: cmd, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, User: 'root' });
  const socket = (await exec.start({ hijack: true, stdin: true, Detach: false, Tty: false })) as Duplex;
  const stream = new Duplex({
    read: () => void socket.resume(),
    write: (chunk: Buffer, _encoding, done) => void socket.write(chunk, done),
    final: (done) => {
      socket.end();
      done();
    },
    destroy: (error, done) => {
      socket.destroy();
      done(error);
    },
  });
  // Frames: an 8-byte header (stream 1 stdout, 2 stderr; big-endian length at byte 4), then the bytes. Read
  // without copying: a payload is handed on as slices of the chunks it came in, however they cut it.
  let header = Buffer.alloc(0);
  let left = 0;
  let isStdout = false;
  socket.on('data', (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (left === 0) {
        const wanted = 8 - header.length;
        header = Buffer.concat([header, chunk.subarray(at, at + wanted)]);
        at += Math.min(wanted, chunk.length - at);
        if (header.length < 8) return;
        isStdout = header[0] === 1;
        left = header.readUInt32BE(4);
        header = Buffer.alloc(0);
        continue;
      }
      const piece = chunk.subarray(at, at + left);
      at += piece.length;
      left -= piece.length;
      if (isStdout && !stream.push(piece)) socket.pause();
    }
  });
  socket.once('end', () => stream.push(null));
  socket.once('close', () => stream.push(null));
  socket.once('error', (error: Error) => stream.destroy(error));
  return stream;
}

/**
 * The machine's socket as this host sees it, when the engine runs here and
 * this process may look into its machines: through the machine's root in
 * `/proc`. Undefined otherwise (an engine over TCP or SSH; a service in
 * another PID namespace, or without the right to look).
 */
async function socketOnThisHost(container: Docker.Container): Promise<{ path: string; hostname: string } | undefined> {
  const modem = (container as unknown as { modem: { getSocketPath(): Promise<string | undefined> | undefined } }).modem;
  if (typeof (await modem.getSocketPath()) !== 'string') return undefined;
  const { State, Config } = await container.inspect();
  if (!State.Running || !State.Pid) return undefined;
  const root = `/proc/${State.Pid}/root`;
  try {
    // The agent's own mount is there: this is a machine of ours, seen from the host.
    await access(`${root}${AGENT_PATH}`);
  } catch {
    return undefined;
  }
  return { path: `${root}${AGENT_SOCKET}`, hostname: Config.Hostname };
}

/** Connects to a Unix socket, trying again every 20 ms for wait while no one listens there yet (a machine just started). */
async function connectWaiting(path: string, wait: number): Promise<Socket> {
  const deadline = Date.now() + wait;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = createConnection(path);
        socket.once('connect', () => {
          socket.removeListener('error', reject);
          resolve(socket);
        });
        socket.once('error', reject);
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ECONNREFUSED') || Date.now() >= deadline) throw error;
      await setTimeout(20);
    }
  }
}

/** A client whose agent answered, in the API this service speaks, as the machine expected (its hostname, when asked). */
async function checkedClient(stream: Duplex, hostname?: string): Promise<AgentClient> {
  const client = new AgentClient(stream);
  try {
    const health = await Promise.race([
      client.health(),
      client.closed.then(() => {
        throw new AgentUnavailable('the machine has no agent that answers (a machine created before the agent, or a machine stopping)');
      }),
    ]);
    if (health.api !== AGENT_API) throw new AgentUnavailable(`the machine's agent speaks API ${health.api}, this service ${AGENT_API}: it is replaced at the machine's next start`);
    if (hostname !== undefined && health.hostname !== hostname) throw new AgentUnavailable(`the socket in the machine answers as ${JSON.stringify(health.hostname)}, not the machine's ${JSON.stringify(hostname)}`);
  } catch (error) {
    client.close();
    throw error;
  }
  return client;
}

/**
 * One connection per running machine to its agent, opened on first use and
 * kept. An engine on this host: the agent's socket itself, through the
 * machine's root in `/proc`, read natively by HTTP/2; elsewhere, an exec of
 * `agent attach` joining the engine's stream to it (read in JavaScript,
 * which left the service's RSS 50–80 MiB higher for good after a machine
 * sent gigabytes: bench/RESULTS.md, issue 39). It ends with the machine (or
 * the agent); the next use opens another. An agent whose API this service
 * does not speak is refused.
 */
export function agentConnections(containerOf: (machineId: string) => Docker.Container, logger?: FastifyBaseLogger) {
  const open = new Map<string, Promise<AgentClient>>();

  async function connect(machineId: string): Promise<AgentClient> {
    const container = containerOf(machineId);
    const local = await socketOnThisHost(container);
    if (local !== undefined) {
      try {
        return await checkedClient(await connectWaiting(local.path, ATTACH_WAIT_MS), local.hostname);
      } catch (error) {
        // The exec below reaches the socket from inside the machine, where a link in it can lead nowhere else.
        logger?.warn({ err: error, machineId }, 'the machine agent\'s socket could not be used from the host; reaching it through the engine');
      }
    }
    return checkedClient(await execConnection(container, [AGENT_PATH, 'attach', '--wait-ms', String(ATTACH_WAIT_MS)]));
  }

  return {
    /** The machine's agent. @throws the engine's error (the machine is not running), or AgentUnavailable. */
    async of(machineId: string): Promise<AgentClient> {
      const known = open.get(machineId);
      if (known !== undefined) {
        const client = await known.catch(() => null);
        if (client?.isOpen) return client;
        if (open.get(machineId) === known) open.delete(machineId);
      }
      const connecting = connect(machineId);
      open.set(machineId, connecting);
      connecting.then(
        (client) => void client.closed.then(() => open.get(machineId) === connecting && open.delete(machineId)),
        () => open.get(machineId) === connecting && open.delete(machineId),
      );
      return connecting;
    },
  };
}

export type AgentConnections = ReturnType<typeof agentConnections>;
