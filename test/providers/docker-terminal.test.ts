import { strict as assert } from 'node:assert';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { asBearer, asSession, PUBLIC_URL } from '../support/app.ts';
import { dockerUnavailable, runToEnd, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { newOwner, type Owner } from '../support/machines.ts';
import { assertRawProblem, exchange } from '../support/raw-http.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();

/** Short, so that a test sees a terminal ended without waiting for the real 30 s. */
const GRACE_MS = 1500;

/** A WebSocket client of the service's terminal, with everything the terminal said so far. */
interface TerminalClient {
  socket: WebSocket;
  /** The id the service gave the terminal (its first text frame). */
  id: Promise<string>;
  output(): string;
  type(text: string): void;
  closed: Promise<{ code: number; reason: string }>;
}

/** Node's WebSocket (undici's) takes the upgrade request's headers as an option its types leave out. */
const withHeaders = (headers: Record<string, string>) => ({ headers }) as unknown as string[];

function openTerminal(port: number, path: string, headers: Record<string, string>): TerminalClient {
  const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`, withHeaders(headers));
  socket.binaryType = 'arraybuffer';
  let output = '';
  let resolveId: (id: string) => void;
  const id = new Promise<string>((resolve) => (resolveId = resolve));
  socket.addEventListener('message', (event) => {
    if (typeof event.data === 'string') {
      const message = JSON.parse(event.data);
      if (message.type === 'terminal') resolveId(message.id);
    } else {
      output += Buffer.from(event.data as ArrayBuffer).toString('utf8');
    }
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.addEventListener('close', (event) => resolve({ code: event.code, reason: event.reason })));
  return {
    socket,
    id,
    output: () => output,
    type: (text) => socket.send(new TextEncoder().encode(text)),
    closed,
  };
}

/** The raw bytes of a WebSocket upgrade request, to read the HTTP answer of a refusal. */
function upgradeRequest(path: string, headers: Record<string, string>): string {
  const lines = [
    `GET ${path} HTTP/1.1`,
    'Host: localhost:3000',
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/**
 * The machine's terminal and control of its screen (CONTRACT 19) on a real
 * Docker machine: a shell over the service's WebSocket that runs commands and
 * resizes, lives on for its grace period after its page leaves (a reload
 * attaches again and is sent what it missed), then ends its processes but
 * those started detached; and every request it must refuse refused before the
 * upgrade, as problem+json.
 */
describe('terminal and control of the screen, on a Docker machine', { skip, timeout: 600_000 }, () => {
  let docker: DockerApp;
  let owner: Owner;
  let other: Owner;
  let port: number;
  let machineId = '';
  let machineToken = '';
  const clients: TerminalClient[] = [];
  const terminal = (path: string, headers: Record<string, string>) => {
    const client = openTerminal(port, path, headers);
    clients.push(client);
    return client;
  };

  before(async () => {
    docker = await startDockerApp({ buildOptions: { terminalGraceMs: GRACE_MS } });
    owner = docker.owner;
    other = await newOwner(docker.ctx);
    await docker.ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (docker.ctx.app.server.address() as AddressInfo).port;
    const created = await owner.call('POST', '/api/machines', { name: 'terminal-box' });
    assert.equal(created.statusCode, 201, created.body);
    ({ id: machineId, mcpToken: machineToken } = created.json());
    await untilStatus(owner, machineId, 'running', 120_000);
  });
  after(async () => {
    for (const client of clients) client.socket.close();
    await docker?.close();
  });

  test('an API key opens a terminal: `ls /` runs, a resize reaches the PTY, and a bad message closes it with 4003', async () => {
    const client = terminal(`/api/machines/${machineId}/terminal?cols=100&rows=30`, asBearer(owner.key));
    assert.match(await client.id, /^term_[A-Za-z0-9_-]{22}$/);
    client.type('ls /\r');
    await eventually(async () => (/\bproc\b[\s\S]*\busr\b/.test(client.output()) ? true : undefined), 30_000, 'ls / listed');
    client.type('stty size\r');
    await eventually(async () => (client.output().includes('30 100') ? true : undefined), 30_000, 'the size asked for at opening');
    client.socket.send(JSON.stringify({ type: 'resize', cols: 123, rows: 45 }));
    client.type('stty size\r');
    await eventually(async () => (client.output().includes('45 123') ? true : undefined), 30_000, 'the new size');
    client.socket.send(JSON.stringify({ type: 'resize', cols: 0, rows: 45 }));
    const closed = await client.closed;
    assert.equal(closed.code, 4003);
    assert.match(closed.reason, /cols and rows must be whole numbers from 1 to 1000/);
  });

  test('the dashboard’s session opens one from its own origin', async () => {
    const client = terminal(`/api/machines/${machineId}/terminal`, asSession(owner.user.session, PUBLIC_URL));
    await client.id;
    client.type('echo "from the $((6 * 7))th page"\r');
    await eventually(async () => (client.output().includes('from the 42th page') ? true : undefined), 30_000, 'the echo');
    client.socket.close();
  });

  test('a page that leaves and comes back within the grace period gets its terminal again with what it missed; past it, its processes end but those started detached', async () => {
    const first = terminal(`/api/machines/${machineId}/terminal`, asBearer(owner.key));
    const id = await first.id;
    // A shell with job control puts `sleep 7001` in a process group of its own: the whole session is hung up on.
    first.type('sleep 7001 & nohup sleep 7002 >/dev/null 2>&1 & setsid sleep 7003 & echo started-$((1 + 1))\r');
    await eventually(async () => (first.output().includes('started-2') ? true : undefined), 30_000, 'the sleeps started');
    first.socket.close();
    await first.closed;

    const again = terminal(`/api/machines/${machineId}/terminal?terminal=${id}`, asBearer(owner.key));
    assert.equal(await again.id, id);
    await eventually(async () => (again.output().includes('started-2') ? true : undefined), 30_000, 'the scrollback replayed');
    again.type('echo still-$((2 + 1))\r');
    await eventually(async () => (again.output().includes('still-3') ? true : undefined), 30_000, 'the same shell answers');
    // Another account cannot attach to it, even knowing its id.
    const otherMachine = await other.call('POST', '/api/machines', { name: 'others-box' });
    assert.equal(otherMachine.statusCode, 201, otherMachine.body);
    assertRawProblem(await exchange(port, upgradeRequest(`/api/machines/${machineId}/terminal?terminal=${id}`, asBearer(other.key))), 404, 'not_found');
    again.socket.close();
    await again.closed;

    const sleeps = async () => (await runToEnd(owner, machineId, { command: "ps -eo args | grep '^sleep 700' || true" })).stdout ?? '';
    const left = await eventually(async () => {
      const found = await sleeps();
      return found.includes('sleep 7001') ? undefined : found;
    }, 60_000, 'the terminal’s own job hung up on');
    assert.match(left, /sleep 7002/, 'nohup kept its process');
    assert.match(left, /sleep 7003/, 'setsid kept its process');
    assertRawProblem(await exchange(port, upgradeRequest(`/api/machines/${machineId}/terminal?terminal=${id}`, asBearer(owner.key))), 404, 'not_found');
  });

  test('refused before the upgrade: no credential, another origin or none with the session, a machine or live-view token, another account, a bad size', async () => {
    const link = await owner.call('POST', `/api/machines/${machineId}/live-view`);
    assert.equal(link.statusCode, 201, link.body);
    const linkToken = String(link.json().url).split('/').pop()!;
    const session = asSession(owner.user.session, PUBLIC_URL);
    for (const path of [`/api/machines/${machineId}/terminal`, `/api/machines/${machineId}/screen/control`]) {
      assertRawProblem(await exchange(port, upgradeRequest(path, {})), 401, 'unauthenticated');
      assertRawProblem(await exchange(port, upgradeRequest(path, { ...session, origin: 'https://evil.example' })), 403, 'cross_site');
      assertRawProblem(await exchange(port, upgradeRequest(path, { cookie: session.cookie! })), 403, 'cross_site');
      assertRawProblem(await exchange(port, upgradeRequest(path, asBearer(machineToken))), 403, 'forbidden');
      assertRawProblem(await exchange(port, upgradeRequest(path, asBearer(linkToken))), 401, 'unauthenticated');
      assertRawProblem(await exchange(port, upgradeRequest(path, asBearer(other.key))), 404, 'not_found');
    }
    assertRawProblem(await exchange(port, upgradeRequest(`/api/machines/${machineId}/terminal?cols=1001&rows=20`, asBearer(owner.key))), 400, 'invalid_request');
    assertRawProblem(await exchange(port, upgradeRequest(`/api/machines/${machineId}/terminal?terminal=term_nope`, asBearer(owner.key))), 404, 'not_found');
  });

  test('control of the screen answers an RFB session for the owner', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/machines/${machineId}/screen/control`, withHeaders(asBearer(owner.key)));
    socket.binaryType = 'arraybuffer';
    const greeting = await new Promise<string>((resolve, reject) => {
      socket.addEventListener('message', (event) => resolve(Buffer.from(event.data as ArrayBuffer).toString('latin1')), { once: true });
      socket.addEventListener('close', (event) => reject(new Error(`closed ${event.code} ${event.reason}`)), { once: true });
    });
    assert.match(greeting, /^RFB 003\.00\d\n$/);
    socket.close();
  });
});
