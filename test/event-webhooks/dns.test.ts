import { strict as assert } from 'node:assert';
import type { LookupAddress } from 'node:dns';
import { after, before, describe, test } from 'node:test';
import { createDnsResolver, type DnsResolver } from '../../src/event-webhooks/targets.ts';
import { createTestApp, registerUser, signIn, type TestContext, type TestUser } from '../support/app.ts';
import { startDnsServer, type DnsServer } from '../support/dns-server.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { createEndpoint, deliveriesOf, emit } from './helpers.ts';

function resolve(dns: DnsResolver, name: string): Promise<LookupAddress[]> {
  return new Promise((resolvePromise, reject) => dns.resolveAll(name, (error, addresses) => (error ? reject(error) : resolvePromise(addresses))));
}

describe('the webhook resolver (c-ares, against a real nameserver on 127.0.0.1)', () => {
  let server: DnsServer;
  let now = 0;
  let dns: DnsResolver;
  before(async () => {
    server = await startDnsServer((name) => {
      if (name === 'short.test') return { a: ['93.184.215.14'], ttl: 2 };
      if (name === 'zero.test') return { a: ['93.184.215.15'], ttl: 0 };
      if (name.startsWith('silent')) return 'silent';
      return 'nxdomain';
    });
    dns = createDnsResolver({ timeoutMs: 300, servers: [server.address], now: () => now });
  });
  after(async () => {
    dns.close();
    await server.close();
  });

  const asked = (name: string) => server.questions.filter((question) => question === `A ${name}`).length;

  test('an answer is kept for its TTL and asked again after it; a TTL of 0 is not kept', async () => {
    assert.deepEqual(await resolve(dns, 'short.test'), [{ address: '93.184.215.14', family: 4 }]);
    now += 1999;
    await resolve(dns, 'SHORT.test.');
    assert.equal(asked('short.test'), 1, 'within the TTL: from the cache (names compared as DNS compares them)');
    now += 1;
    await resolve(dns, 'short.test');
    assert.equal(asked('short.test'), 2, 'the TTL is over: asked again');
    await resolve(dns, 'zero.test');
    await resolve(dns, 'zero.test');
    assert.equal(asked('zero.test'), 2);
  });

  test('concurrent resolutions of one name share one query', async () => {
    now += 10_000;
    await Promise.all(Array.from({ length: 5 }, () => resolve(dns, 'short.test')));
    assert.equal(asked('short.test'), 3);
  });

  test('no such name is ENOTFOUND; a nameserver that never answers is ETIMEOUT after the timeout', async () => {
    await assert.rejects(resolve(dns, 'nowhere.test'), { code: 'ENOTFOUND' });
    await assert.rejects(resolve(dns, 'silent.test'), { code: 'ETIMEOUT' });
  });

  test('IP literals and localhost names are answered without asking (the address checks then judge them)', async () => {
    const before = server.questions.length;
    assert.deepEqual(await resolve(dns, '93.184.215.14'), [{ address: '93.184.215.14', family: 4 }]);
    assert.deepEqual(await resolve(dns, '[2606:4700::1]'), [{ address: '2606:4700::1', family: 6 }]);
    assert.deepEqual((await resolve(dns, 'api.localhost')).map(({ address }) => address), ['127.0.0.1', '::1']);
    assert.equal(server.questions.length, before);
  });
});

describe('a nameserver that never answers holds up no one else', { timeout: 60_000 }, () => {
  const STALLED_NAMES = 8; // twice libuv's four threads, which dns.lookup would each hold
  const SIGN_INS = 6;
  const OTHER_EVENTS = 6;
  let ctx: TestContext;
  let server: DnsServer;
  let dns: DnsResolver;
  let receiver: Receiver;
  let stalled: TestUser;
  let other: TestUser;
  before(async () => {
    server = await startDnsServer((name) => (name === 'receiver.test' ? { a: ['127.0.0.1'], ttl: 60 } : name.startsWith('stall-') ? 'silent' : 'nxdomain'));
    // The service's own resolver, asking the test's nameserver instead of the system's.
    dns = createDnsResolver({ timeoutMs: 4000, servers: [server.address] });
    receiver = await startReceiver();
    ctx = await createTestApp({
      realClock: true,
      env: { RATE_LIMIT: 'off', WEBHOOK_TIMEOUT_MS: '8000', WEBHOOK_MAX_ATTEMPTS: '1' },
      buildOptions: { resolveAll: dns.resolveAll },
    });
    stalled = await registerUser(ctx);
    other = await registerUser(ctx);
    for (let i = 0; i < STALLED_NAMES; i++) await createEndpoint(ctx, stalled, { url: `https://stall-${i}.test/hook` });
    await createEndpoint(ctx, other, { url: `https://receiver.test:${receiver.port}/hook` });
  });
  after(async () => {
    await ctx.close();
    dns.close();
    await receiver.close();
    await server.close();
  });

  const stalledNamesAsked = () => new Set(server.questions.filter((question) => question.startsWith('A stall-'))).size;

  /** Signs `other` in SIGN_INS times while OTHER_EVENTS of its events are delivered; resolves when all are done. */
  async function signInsAndDeliveries(): Promise<number> {
    const started = performance.now();
    const delivered = receiver.requests.length;
    for (let i = 0; i < OTHER_EVENTS; i++) await emit(ctx, other.id, 'machine.created');
    await Promise.all(Array.from({ length: SIGN_INS }, () => signIn(ctx, other)));
    await receiver.waitFor(delivered + OTHER_EVENTS, 30_000);
    return performance.now() - started;
  }

  test('while every lookup of one account\'s endpoints is unanswered, sign-ins and another endpoint\'s deliveries go on', async (t) => {
    // Regression: dns.lookup held one of libuv's four threads per lookup for as long as the nameserver took;
    // argon2 needs those threads, so sign-ins and every delivery to a name waited behind a stalling nameserver.
    const usual = await signInsAndDeliveries();

    await emit(ctx, stalled.id, 'machine.created');
    await eventually(() => (stalledNamesAsked() === STALLED_NAMES || undefined), 10_000, 'every stalled name asked at once');
    const during = await signInsAndDeliveries();

    const stalledDeliveries = await deliveriesOf(ctx, stalled);
    assert.equal(stalledDeliveries.length, STALLED_NAMES);
    for (const delivery of stalledDeliveries) {
      assert.deepEqual({ status: delivery.status, lastResponse: delivery.lastResponse }, { status: 'pending', lastResponse: null }, 'the sign-ins and the other deliveries were done while every stalled lookup was still unanswered');
    }
    t.diagnostic(`${SIGN_INS} sign-ins and ${OTHER_EVENTS} deliveries: ${Math.round(usual)} ms before the stall, ${Math.round(during)} ms during it`);

    // The stalled names then fail on their own, each as a failed attempt that says why.
    const failed = await eventually(async () => {
      const deliveries = await deliveriesOf(ctx, stalled);
      return deliveries.every((delivery) => delivery.status === 'failed') ? deliveries : undefined;
    }, 20_000, 'the stalled deliveries failed');
    for (const delivery of failed) assert.equal(delivery.lastResponse?.error, 'DNS lookup timed out');
  });
});
