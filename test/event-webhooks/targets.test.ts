import { strict as assert } from 'node:assert';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { forbiddenReason } from '../../src/event-webhooks/targets.ts';
import { asSession, createTestApp, registerUser, type TestContext, type TestUser } from '../support/app.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { hasOpenssl, makeSelfSignedCertificate } from '../support/self-signed.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';
import { eventually } from '../support/receiver.ts';

describe('forbiddenReason', () => {
  const refused: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.0.9', /loopback/],
    ['10.0.0.1', /private/],
    ['172.16.5.4', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /link-local/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['0.0.0.0', /unspecified/],
    ['224.0.0.1', /multicast/],
    ['192.0.2.1', /documentation/],
    ['198.18.0.1', /benchmarking/],
    ['255.255.255.255', /reserved/],
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /loopback, embedded/],
    ['::ffff:7f00:1', /loopback, embedded/],
    ['::ffff:169.254.169.254', /link-local/],
    ['::ffff:0:127.0.0.1', /loopback, embedded/],
    ['::ffff:0:a00:1', /private, embedded/],
    ['::127.0.0.1', /loopback/],
    ['64:ff9b::10.0.0.1', /private, embedded/],
    ['2002:a9fe:a9fe::1', /link-local/],
    ['fd12:3456::1', /unique local/],
    ['fe80::1', /link-local/],
    ['ff02::1', /multicast/],
    ['2001:db8::1', /documentation/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/],
  ];
  for (const [address, reason] of refused) {
    test(`refuses ${address}`, () => assert.match(String(forbiddenReason(address)), reason));
  }
  for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:0808:0808::1']) {
    test(`allows ${address}`, () => assert.equal(forbiddenReason(address), null));
  }
});

describe('webhook targets when private targets are not allowed', () => {
  let ctx: TestContext;
  let user: TestUser;
  let hook: Receiver;
  let flipLookups = 0;

  before(async () => {
    ctx = await createTestApp({
      realClock: true,
      env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'off', WEBHOOK_TIMEOUT_MS: '500', WEBHOOK_RETRY_DELAYS: '50ms', WEBHOOK_MAX_ATTEMPTS: '2' },
      // Stands in for DNS as a hosts file would: rebind.test points at this machine, public.test at a public address.
      buildOptions: {
        resolveAll: (hostname, callback) => {
          if (hostname === 'rebind.test') return callback(null, [{ address: '127.0.0.1', family: 4 }]);
          if (hostname === 'mixed.test') return callback(null, [{ address: '93.184.215.14', family: 4 }, { address: '10.1.1.1', family: 4 }]);
          if (hostname === 'flip.test') {
            // A rebinding name: public for one lookup, this machine for the next.
            flipLookups += 1;
            return callback(null, [{ address: flipLookups % 2 === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }]);
          }
          callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
        },
      },
    });
    user = await registerUser(ctx);
    hook = await startReceiver();
  });
  after(async () => {
    await hook.close();
    await ctx.close();
  });

  const create = (url: string) => ctx.app.inject({ method: 'POST', url: '/api/event-webhooks', headers: asSession(user.session), payload: { url } });

  test('IP literals and local names in the URL are refused when the endpoint is created', async () => {
    for (const url of [
      `https://127.0.0.1:${hook.port}/hook`,
      'https://10.0.0.7/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::1]/hook',
      'https://localhost/hook',
      'https://api.localhost/hook',
      'https://2130706433/hook', // 127.0.0.1 as one decimal number
      'https://0x7f.1/hook',
      'https://0177.0.0.1/hook',
      'https://100.64.0.1/hook',
      'https://224.0.0.1/hook',
      'https://192.0.2.10/hook',
      'https://[2002:7f00:1::]/hook', // 6to4 of 127.0.0.1
      'https://[64:ff9b::7f00:1]/hook', // NAT64 of 127.0.0.1
      'https://[::ffff:0:7f00:1]/hook', // IPv4-translated 127.0.0.1
      'https://[fd00::1]/hook',
    ]) {
      const response = await create(url);
      assert.equal(response.statusCode, 400, url);
      assert.equal(response.json().code, 'invalid_request');
      assert.match(response.json().detail, /not reachable from the internet/);
      assert.match(response.json().detail, /WEBHOOK_ALLOW_PRIVATE_TARGETS=on/, 'names the setting that allows it');
    }
    const listed = await ctx.app.inject({ method: 'GET', url: '/api/event-webhooks', headers: asSession(user.session) });
    assert.equal(listed.json().data.length, 0);
  });

  test('a URL changed to a private address is refused like a new one, and the endpoint keeps its URL', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: 'https://public.example/hook' });
    const patched = await ctx.app.inject({ method: 'PATCH', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session), payload: { url: 'https://169.254.169.254/latest' } });
    assert.equal(patched.statusCode, 400);
    assert.match(patched.json().detail, /not reachable from the internet: 169.254.169.254 is a link-local/);
    const read = await ctx.app.inject({ method: 'GET', url: `/api/event-webhooks/${endpoint.id}`, headers: asSession(user.session) });
    assert.equal(read.json().url, 'https://public.example/hook');
  });

  test('spaces and control characters in a URL are refused, not silently dropped by the parser', async () => {
    for (const url of [' https://public.example/hook', 'https://public.example/hook ', 'https://pub\tlic.example/hook', 'https://public.example/ho\nok']) {
      const response = await create(url);
      assert.equal(response.statusCode, 400, JSON.stringify(url));
      assert.match(response.json().detail, /spaces or control characters/);
    }
  });

  test('the connection goes to the address that was checked: a name that rebinds between lookups never reaches this machine', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: `https://flip.test:${hook.port}/hook` });
    for (let attempt = 0; attempt < 4; attempt++) {
      const before = flipLookups;
      const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) });
      assert.equal(response.json().ok, false);
      assert.equal(flipLookups - before, 1, 'one lookup per connection: the one that was checked');
    }
    assert.equal(hook.requests.length, 0, 'nothing reached the receiver on 127.0.0.1');
  });

  test('a hostname that resolves to 127.0.0.1 is refused at the attempt, with a clear error', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: `https://rebind.test:${hook.port}/hook` });
    const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) });
    assert.deepEqual(response.json(), {
      ok: false,
      status: null,
      error: 'refused target: rebind.test resolves to 127.0.0.1, a loopback address; a receiver on this machine or a private network needs WEBHOOK_ALLOW_PRIVATE_TARGETS=on on the service (local development only)',
    });
    await emit(ctx, user.id, 'machine.created');
    const failed = await eventually(async () => (await deliveriesOf(ctx, user, endpoint.id)).find((d) => d.eventType === 'machine.created' && d.status === 'failed'));
    assert.match(String(failed.lastResponse?.error), /refused target/);
    assert.equal(hook.requests.length, 0, 'nothing reached the receiver on 127.0.0.1');
  });

  test('a hostname with any private address among its addresses is refused', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: 'https://mixed.test/hook' });
    const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) });
    assert.match(response.json().error, /refused target: mixed.test resolves to 10.1.1.1, a private address/);
  });

  test('an unknown host is a failed attempt naming the DNS failure', async () => {
    const endpoint = await createEndpoint(ctx, user, { url: 'https://nowhere.test/hook' });
    const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) });
    assert.deepEqual(response.json(), { ok: false, status: null, error: 'host not found' });
  });
});

describe('a receiver whose certificate the service does not trust', { skip: !(await hasOpenssl()) && 'needs openssl' }, () => {
  let ctx: TestContext;
  let user: TestUser;
  let dir: string;
  let server: Server;

  before(async () => {
    ctx = await createTestApp({ realClock: true });
    user = await registerUser(ctx);
    dir = await mkdtemp(join(tmpdir(), 'untrusted-'));
    // Self-signed and not in NODE_EXTRA_CA_CERTS (the test CA is).
    const { key, cert } = await makeSelfSignedCertificate(dir);
    server = createServer({ key: await readFile(key), cert: await readFile(cert) }, (_request, response) => response.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await ctx.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('the test send names NODE_EXTRA_CA_CERTS, not Node\'s generic --use-system-ca', async () => {
    const port = (server.address() as { port: number }).port;
    const endpoint = await createEndpoint(ctx, user, { url: `https://127.0.0.1:${port}/hook` });
    const response = await ctx.app.inject({ method: 'POST', url: `/api/event-webhooks/${endpoint.id}/test`, headers: asSession(user.session) });
    const { ok, status, error } = response.json();
    assert.deepEqual([ok, status], [false, null]);
    assert.match(error, /^TLS error: the receiver's certificate is not trusted \(self[- ]signed certificate\); for a private CA or a self-signed certificate, start the service with NODE_EXTRA_CA_CERTS=/);
    assert.doesNotMatch(error, /use-system-ca/);
  });
});
