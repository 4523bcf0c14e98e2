import { strict as assert } from 'node:assert';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { connectDatabase } from '../src/db/connect.ts';
import { freshDatabase, onPostgres, TEST_DATABASE_URL, urlWithSchema, type TestDatabase } from './support/database.ts';
import { linkIn, readOutbox, type ReceivedMail } from './support/mail.ts';
import { dockerUnavailable } from './support/docker.ts';
import { freePort, startServiceProcess } from './support/service-process.ts';

const noEngine = await dockerUnavailable();

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const STARTUP_DEADLINE_MS = 20_000;

/** Polls `check` until it returns a value, the child exits, or the deadline passes. */
async function waitFor<T>(what: string, child: ChildProcess, check: () => Promise<T | undefined>, output: () => string): Promise<T> {
  const deadline = Date.now() + STARTUP_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} while waiting for ${what}:\n${output()}`);
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await delay(50);
  }
  throw new Error(`timed out waiting for ${what}:\n${output()}`);
}

describe('the real server, as a child process', () => {
  let child: ChildProcess;
  let baseUrl: string;
  let dir: string;
  let mailDir: string;
  let database: TestDatabase;
  let output = '';
  let stdout = '';
  let stderr = '';

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'server-test-'));
    mailDir = join(dir, 'mail');
    database = await freshDatabase(join(dir, 'service.db'));
    const port = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    // SMTP_URL is left unset (mail goes to MAIL_DIR) and the parent's environment is not inherited. MACHINE_PROVIDER
    // is left to its default, auto, with DOCKER_HOST where no engine listens: the simulated provider, and the start-up line says so.
    const env = {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: baseUrl,
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: mailDir,
      LOG_LEVEL: 'info',
      DOCKER_HOST: `unix://${join(dir, 'no-engine.sock')}`,
    };
    child = spawn(process.execPath, ['src/server.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      stdout += chunk.toString();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      stderr += chunk.toString();
    });
    await waitFor('/healthz', child, async () => ((await fetch(`${baseUrl}/healthz`)).ok ? true : undefined), () => output);
  });

  after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    await database.drop();
    await rm(dir, { recursive: true, force: true });
  });

  test('/healthz and /readyz answer 200', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const response = await fetch(`${baseUrl}${path}`);
      assert.equal(response.status, 200, path);
      assert.deepEqual(await response.json(), { ok: true });
    }
  });

  test('start-up prints one line a person reads on stderr (URL, database, mail, provider: auto chose simulated, no engine answering); stdout stays JSON lines', async () => {
    // Written as the server starts listening; the pipe may bring it after /healthz answered.
    await waitFor('the start-up line', child, async () => (stderr.includes('\n') ? true : undefined), () => output);
    const lines = stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, stderr);
    assert.match(lines[0]!, new RegExp(`^Machine Platform is ready: dashboard and API at ${baseUrl} .* · ${onPostgres ? 'the PostgreSQL database "[^"]+" on \\S+' : 'the SQLite database at \\S*service\\.db'} · mail as \\.eml files in ${mailDir} \\(SMTP_URL is not set\\) · machines on the simulated provider: they run no commands \\(MACHINE_PROVIDER=auto: no Docker engine at unix://${dir}/no-engine\\.sock\\); for real machines, start a Docker engine \\(or point DOCKER_HOST at one\\) and restart$`));
    const logLines = stdout.trimEnd().split('\n');
    for (const line of logLines) assert.doesNotThrow(() => JSON.parse(line), line);
    assert.ok(logLines.some((line) => JSON.parse(line).msg === 'listening'), stdout);
  });

  test('/api/openapi.json describes the account and API key routes', async () => {
    const response = await fetch(`${baseUrl}/api/openapi.json`);
    assert.equal(response.status, 200);
    const document = (await response.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    assert.match(document.openapi, /^3\./);
    const expected: Array<[string, string]> = [
      ['/api/auth/register', 'post'],
      ['/api/auth/login', 'post'],
      ['/api/auth/logout', 'post'],
      ['/api/auth/verify', 'post'],
      ['/api/auth/forgot', 'post'],
      ['/api/auth/reset', 'post'],
      ['/api/me', 'get'],
      ['/api/me/verify-email', 'post'],
      ['/api/me/password', 'post'],
      ['/api/me/sessions', 'get'],
      ['/api/me/sessions/{id}', 'delete'],
      ['/api/keys', 'post'],
      ['/api/keys', 'get'],
      ['/api/keys/{id}', 'delete'],
      // CONTRACT 17
      ['/api/auth/login/second-factor', 'post'],
      ['/api/auth/passkey/options', 'post'],
      ['/api/auth/passkey', 'post'],
      ['/api/me/totp', 'post'],
      ['/api/me/totp/confirm', 'post'],
      ['/api/me/totp', 'delete'],
      ['/api/me/recovery-codes', 'post'],
      ['/api/me/reauthenticate', 'post'],
      ['/api/me/passkeys/options', 'post'],
      ['/api/me/passkeys', 'post'],
      ['/api/me/passkeys', 'get'],
      ['/api/me/passkeys/{id}', 'delete'],
      ['/api/me/security-log', 'get'],
    ];
    for (const [path, method] of expected) assert.ok(document.paths[path]?.[method], `${method.toUpperCase()} ${path} is documented`);
  });

  test('register over HTTP: 201 with the cookie, and the confirmation mail lands in MAIL_DIR with a working link', async () => {
    const response = await fetch(`${baseUrl}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: baseUrl },
      body: JSON.stringify({ email: 'child@example.com', password: 'correct horse', name: 'Child' }),
    });
    assert.equal(response.status, 201);
    assert.match(response.headers.get('set-cookie') ?? '', /^session=[A-Za-z0-9_-]{43};.*HttpOnly/i);

    const mail = await waitFor<ReceivedMail>('the .eml file', child, async () => (await readOutbox(mailDir)).find((m) => m.to.includes('child@example.com')), () => output);
    const link = linkIn(mail, '/verify-email');
    assert.ok(link.url.startsWith(`${baseUrl}/verify-email?token=`));
    const verify = await fetch(`${baseUrl}/api/auth/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: link.token }),
    });
    assert.equal(verify.status, 200);

    // What the machines page reads: auto chose the simulated provider (no engine at DOCKER_HOST).
    const cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!;
    const host = await fetch(`${baseUrl}/api/dashboard/machines`, { headers: { cookie } });
    assert.equal(host.status, 200);
    assert.deepEqual(await host.json(), { provider: 'simulated', configured: 'auto', image: null });

    // Outside tests the password hash is argon2id at OWASP's cost (m=19 MiB, t=2, p=1).
    const db = connectDatabase(urlWithSchema(database)).db;
    try {
      const { password_hash } = await db.selectFrom('accounts').select('password_hash').where('email', '=', 'child@example.com').executeTakeFirstOrThrow();
      assert.match(password_hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    } finally {
      await db.destroy();
    }
  });

  test('/metrics is Prometheus text with http_requests_total', async () => {
    const response = await fetch(`${baseUrl}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await response.text();
    assert.match(text, /^# TYPE http_requests_total counter$/m);
    assert.match(text, /^http_requests_total\{[^}]*route="\/healthz"[^}]*\} \d+/m);
  });

  test('SIGTERM makes it exit 0', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output);
  });
});

describe('start-up failures stop the server with one line naming the variable', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'startup-test-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  function runServer(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    return new Promise((done) => {
      const child = execFile(
        './node_modules/.bin/node',
        ['src/server.ts'],
        { cwd: ROOT, env: { PATH: process.env.PATH ?? '', MAIL_DIR: join(dir, 'mail'), LOG_LEVEL: 'warn', MACHINE_PROVIDER: 'simulated', ...env }, timeout: 20_000 },
        (_error, _stdout, stderr) => done({ code: child.exitCode, stderr }),
      );
    });
  }

  function assertOneLine(result: { code: number | null; stderr: string }, variable: string): void {
    assert.equal(result.code, 1, result.stderr);
    const lines = result.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, `one line, got:\n${result.stderr}`);
    assert.match(lines[0]!, new RegExp(`\\b${variable}\\b`));
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack');
  }

  test('a directory as the SQLite path names DATABASE_URL', async () => {
    // Regression: this and the failures below printed a stack trace instead of one line.
    assertOneLine(await runServer({ DATABASE_URL: `sqlite:${dir}`, PORT: String(await freePort()) }), 'DATABASE_URL');
  });

  test('a port already in use names PORT', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    try {
      const { port } = blocker.address() as AddressInfo;
      const result = await runServer({ DATABASE_URL: `sqlite:${join(dir, 'in-use.db')}`, HOST: '127.0.0.1', PORT: String(port) });
      assertOneLine(result, 'PORT');
      assert.match(result.stderr, new RegExp(`\\b${port}\\b`));
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  test('a HOST that is not an address of this machine names HOST', async () => {
    assertOneLine(await runServer({ DATABASE_URL: `sqlite:${join(dir, 'host.db')}`, HOST: '192.0.2.1', PORT: String(await freePort()) }), 'HOST');
  });

  test('a PostgreSQL server that refuses the connection names DATABASE_URL, without the password', async () => {
    const result = await runServer({ DATABASE_URL: `postgres://postgres:hunter2secret@127.0.0.1:${await freePort()}/app`, PORT: String(await freePort()) });
    assertOneLine(result, 'DATABASE_URL');
    assert.doesNotMatch(result.stderr, /hunter2secret/);
  });

  test('MACHINE_PROVIDER=docker with no engine at DOCKER_HOST names DOCKER_HOST', async () => {
    const result = await runServer({ MACHINE_PROVIDER: 'docker', DOCKER_HOST: `unix://${join(dir, 'no-engine.sock')}`, DATABASE_URL: `sqlite:${join(dir, 'docker.db')}`, PORT: String(await freePort()) });
    assertOneLine(result, 'DOCKER_HOST');
  });

  test('MACHINE_PROVIDER=docker with an image the engine lacks names MACHINE_IMAGE and how to build it', { skip: noEngine }, async () => {
    const result = await runServer({ MACHINE_PROVIDER: 'docker', MACHINE_IMAGE: 'machine-platform/no-such-image:0', DATABASE_URL: `sqlite:${join(dir, 'image.db')}`, PORT: String(await freePort()) });
    assertOneLine(result, 'MACHINE_IMAGE');
    assert.match(result.stderr, /npm run machine-image/);
  });

  test('a PostgreSQL database that does not exist names DATABASE_URL', { skip: !onPostgres && 'needs PostgreSQL' }, async () => {
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = '/no_such_database_for_this_test';
    const result = await runServer({ DATABASE_URL: url.toString(), PORT: String(await freePort()) });
    assertOneLine(result, 'DATABASE_URL');
    assert.match(result.stderr, /no_such_database_for_this_test/);
  });
});

describe('graceful shutdown', () => {
  test('SIGTERM lets a request in flight finish, then exits 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sigterm-test-'));
    const database = await freshDatabase(join(dir, 'service.db'));
    const service = await startServiceProcess({ DATABASE_URL: urlWithSchema(database), MAIL_DIR: join(dir, 'mail') });
    try {
      const body = JSON.stringify({ email: 'in-flight@example.com', password: 'correct horse battery', name: 'In Flight' });
      const half = Math.floor(body.length / 2);
      const { port } = new URL(service.url);
      let answered!: (value: { status: number; body: string }) => void;
      const answer = new Promise<{ status: number; body: string }>((resolve) => (answered = resolve));
      const req = httpRequest(
        { host: '127.0.0.1', port: Number(port), path: '/api/auth/register', method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), origin: service.url } },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => answered({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', (error) => answered({ status: 0, body: String(error) }));
      // Headers and half the body: the server is reading this request when the signal comes.
      req.write(body.slice(0, half));
      await delay(300);
      const exited = service.kill('SIGTERM');
      await delay(300);
      assert.equal(service.child.exitCode, null, 'still running while the request is in flight');
      req.end(body.slice(half));
      const response = await answer;
      assert.equal(response.status, 201, response.body);
      assert.equal(JSON.parse(response.body).account.email, 'in-flight@example.com');
      assert.equal(await exited, 0, service.stderr());
    } finally {
      await service.kill('SIGKILL');
      await database.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** Whether something can listen on the port now: the server has let it go. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

describe('npm start', () => {
  test('SIGTERM to the process `npm start` started frees the port within WEBHOOK_TIMEOUT_MS + 1 s (npm exited and left the server running)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'npm-start-test-'));
    const database = await freshDatabase(join(dir, 'service.db'));
    const port = await freePort();
    const timeoutMs = 10_000;
    // Its own process group, so that whatever it leaves behind can be cleaned up below.
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      detached: true,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? dir,
        npm_config_update_notifier: 'false',
        PORT: String(port),
        HOST: '127.0.0.1',
        DATABASE_URL: urlWithSchema(database),
        MAIL_DIR: join(dir, 'mail'),
        LOG_LEVEL: 'warn',
        MACHINE_PROVIDER: 'simulated',
        WEBHOOK_TIMEOUT_MS: String(timeoutMs),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const npmExited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    try {
      await waitFor('/healthz', npm, async () => ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok ? true : undefined), () => output);
      const signalled = Date.now();
      npm.kill('SIGTERM');
      let free = false;
      while (!free && Date.now() - signalled < timeoutMs + 1000) {
        free = await portIsFree(port);
        if (!free) await delay(50);
      }
      assert.ok(free, `port ${port} is still taken ${timeoutMs + 1000} ms after SIGTERM:\n${output}`);
      assert.equal(await npmExited, 0, output);
    } finally {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // the group is gone: nothing was left behind
      }
      await database.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
