import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { signatureHeader } from '../../src/event-webhooks/signing.ts';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { hasOpenssl, makeSelfSignedCertificate } from '../support/self-signed.ts';
import { freePort, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { createEndpoint } from './helpers.ts';
import { eventually } from '../support/receiver.ts';

const example = fileURLToPath(new URL('../../examples/receiver.js', import.meta.url));
const tls = (name: string) => fileURLToPath(new URL(`../support/tls/${name}`, import.meta.url));

/** The example receiver of docs/webhooks.md, run as customers would run it, against our real deliveries. */
describe('examples/receiver.js', () => {
  let ctx: TestContext;
  let user: TestUser;
  let child: ChildProcess;
  let url: string;
  let secret: string;
  let endpointId: string;
  const lines: string[] = [];

  before(async () => {
    ctx = await createTestApp({ realClock: true });
    user = await registerUser(ctx);
    const port = await freePort();
    url = `https://127.0.0.1:${port}/hook`;
    const endpoint = await createEndpoint(ctx, user, { url });
    secret = endpoint.secret;
    endpointId = endpoint.id;
    child = spawn(process.execPath, [example], {
      env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port), TLS_KEY: tls('server.key'), TLS_CERT: tls('server.pem') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().trim().split('\n')));
    await new Promise<void>((resolve) => child.stderr!.once('data', () => resolve()));
  });
  after(async () => {
    child?.kill();
    await ctx.close();
  });

  test('accepts our signed deliveries and logs each event once', async () => {
    const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpointId}/test`, headers: asSession(user.session) });
    assert.deepEqual(response.json(), { ok: true, status: 204, error: null });
    await eventually(() => (lines.length > 0 ? true : undefined), 5000, 'the receiver logging the event');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(lines.length, 1);
    assert.equal(JSON.parse(lines[0]!).type, 'webhook.test');
  });

  test('refuses a forged, tampered or stale delivery with 400', async () => {
    const body = JSON.stringify({ id: 'evt_forged', type: 'machine.created', createdAt: new Date().toISOString(), data: {} });
    const send = (headers: Record<string, string>, payload = body) => fetch(url, { method: 'POST', headers, body: payload });
    assert.equal((await send({ 'service-signature': signatureHeader('whsec_not-the-secret', body, Date.now()) })).status, 400);
    assert.equal((await send({ 'service-signature': signatureHeader(secret, body, Date.now()) }, body.replace('created', 'destroyed'))).status, 400);
    assert.equal((await send({ 'service-signature': signatureHeader(secret, body, Date.now() - 600_000) })).status, 400);
    assert.equal((await send({})).status, 400);
    assert.equal((await send({ 'service-signature': signatureHeader(secret, body, Date.now()) })).status, 204, 'the genuine one passes');
  });
});

/**
 * docs/webhooks.md, "Receive webhooks locally", step by step: a certificate made with
 * openssl, the service started with NODE_EXTRA_CA_CERTS naming it and
 * WEBHOOK_ALLOW_PRIVATE_TARGETS=on, an endpoint on 127.0.0.1, and the example
 * receiver verifying a test event and a machine's `machine.created`.
 */
describe('docs/webhooks.md: receive webhooks locally', { skip: !(await hasOpenssl()) && 'needs openssl' }, () => {
  let dir: string;
  let database: TestDatabase;
  let service: ServiceProcess;
  let receiver: ChildProcess | undefined;
  const lines: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'local-receiver-'));
    database = await freshDatabase(join(dir, 'service.db'));
  });
  after(async () => {
    receiver?.kill();
    await service?.kill('SIGKILL');
    await database.drop();
    await rm(dir, { recursive: true, force: true });
  });

  test('openssl certificate → NODE_EXTRA_CA_CERTS + WEBHOOK_ALLOW_PRIVATE_TARGETS → endpoint → examples/receiver.js gets verified events', async () => {
    const { key, cert } = await makeSelfSignedCertificate(dir);
    service = await startServiceProcess({
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: join(dir, 'mail'),
      NODE_EXTRA_CA_CERTS: cert,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
      MACHINE_BOOT_MS: '100',
    });
    const call = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
      const response = await fetch(`${service.url}${path}`, { method, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
      return { status: response.status, headers: response.headers, json: await response.json().catch(() => null) };
    };
    const signedUp = await call('POST', '/api/auth/register', { origin: service.url }, { email: 'local@example.com', password: 'correct horse battery', name: 'Local' });
    assert.equal(signedUp.status, 201);
    const cookie = String(signedUp.headers.get('set-cookie')).split(';')[0]!;
    const apiKey = (await call('POST', '/api/keys', { cookie, origin: service.url }, { name: 'local' })).json.key as string;
    const bearer = { authorization: `Bearer ${apiKey}` };

    const port = await freePort();
    const endpoint = await call('POST', '/api/event-webhooks', bearer, { url: `https://127.0.0.1:${port}/hooks` });
    assert.equal(endpoint.status, 201, JSON.stringify(endpoint.json));
    receiver = spawn(process.execPath, [example], {
      env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: endpoint.json.secret, TLS_KEY: key, TLS_CERT: cert, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    receiver.stdout!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().trim().split('\n')));
    await new Promise<void>((resolve) => receiver!.stderr!.once('data', () => resolve()));

    const tested = await call('POST', `/api/event-webhooks/${endpoint.json.id}/test`, bearer);
    assert.deepEqual(tested.json, { ok: true, status: 204, error: null }, service.stderr());
    const machine = await call('POST', '/api/machines', bearer, { name: 'first-machine' });
    assert.equal(machine.status, 201);
    const types = await eventually(() => {
      const seen = lines.map((line) => JSON.parse(line).type as string);
      return seen.includes('machine.created') ? seen : undefined;
    }, 10_000, 'machine.created at the receiver');
    assert.deepEqual(types, ['webhook.test', 'machine.created']);
  });
});
