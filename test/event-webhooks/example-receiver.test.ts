import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { signatureHeader } from '../../src/event-webhooks/signing.ts';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { freePort } from '../support/service-process.ts';
import { createEndpoint } from './helpers.ts';
import { eventually } from '../support/receiver.ts';

const example = fileURLToPath(new URL('../../examples/receiver.js', import.meta.url));
const tls = (name: string) => fileURLToPath(new URL(`../support/tls/${name}`, import.meta.url));

/** The README's example receiver, run as customers would run it, against our real deliveries. */
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
