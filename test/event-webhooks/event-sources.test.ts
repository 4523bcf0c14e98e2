import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../src/event-webhooks/verify-webhook.js';
import {
  assertMachineEvent,
  assertRunEvent,
  createMachine,
  eventsOf,
  finishBoot,
  machineSuite,
  pathOf,
  runningMachine,
  signatureHeader,
  type Envelope,
} from '../support/machines.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';

/**
 * Every event type of spec 6.1, caused through the public API, arriving at a
 * real HTTPS receiver: signed, with the spec's headers, and byte for byte the
 * envelope the service stored, checked field by field.
 */
describe('every event type, from the public API to a real HTTPS receiver', () => {
  const suite = machineSuite();
  let hook: Receiver;
  let secret: string;
  const seen = new Set<string>();

  before(async () => {
    hook = await startReceiver();
    const endpoint = await suite.owner.call('POST', '/api/event-webhooks', { url: hook.url, events: ['*'] });
    secret = endpoint.json().secret;
  });
  after(() => hook.close());

  /**
   * The next `types.length` deliveries, checked against what was stored, as parsed envelopes. Counted by
   * delivery id, as a receiver must (delivery is at least once: moving the injected clock can repeat one).
   */
  async function received(...types: string[]): Promise<Envelope[]> {
    const requests = await eventually(() => {
      const firsts = hook.requests.filter((request, i) => hook.requests.findIndex((other) => other.headers['service-delivery'] === request.headers['service-delivery']) === i);
      const unseen = firsts.filter((request) => !seen.has(String(request.headers['service-delivery'])));
      return unseen.length >= types.length ? unseen.slice(0, types.length) : undefined;
    }, 10_000, `deliveries of ${types.join(', ')}`);
    for (const request of requests) seen.add(String(request.headers['service-delivery']));
    const stored = new Map((await eventsOf(suite.ctx, suite.owner)).map((event) => [event.id, event]));
    const envelopes = requests.map((request) => {
      assert.equal(request.headers['content-type'], 'application/json');
      assert.match(String(request.headers['service-delivery']), /^dlv_[0-9a-z]{26}$/);
      // Signatures carry the service's clock, here the injected one.
      const event = verifyWebhook(request.body, String(request.headers['service-signature']), secret, { now: Math.floor(suite.ctx.clock.now() / 1000) }) as Envelope;
      assert.equal(request.headers['service-event'], event.type);
      assert.equal(request.body, JSON.stringify(stored.get(event.id)), 'delivered exactly as stored');
      return event;
    });
    assert.deepEqual(envelopes.map((e) => e.type).sort(), [...types].sort());
    return envelopes;
  }
  const ofType = (events: Envelope[], type: string) => events.find((event) => event.type === type);

  test('machine.created, stopped (requested), started and destroyed', async () => {
    const machine = await createMachine(suite.owner, { name: 'lifecycle', externalId: 'ticket-42', labels: { team: 'infra', env: 'test' } });
    await finishBoot(suite.ctx);
    const [created] = await received('machine.created');
    assertMachineEvent(created, 'machine.created', machine, 'running', {}, suite.ctx.clock.now());

    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await suite.ctx.app.jobs.drain();
    const [stopped] = await received('machine.stopped');
    assertMachineEvent(stopped, 'machine.stopped', machine, 'stopped', { reason: 'requested' }, suite.ctx.clock.now());

    await suite.owner.call('POST', `/api/machines/${machine.id}/start`);
    await finishBoot(suite.ctx);
    const [started] = await received('machine.started');
    assertMachineEvent(started, 'machine.started', machine, 'running', {}, suite.ctx.clock.now());

    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    await suite.ctx.app.jobs.drain();
    const [destroyed] = await received('machine.destroyed');
    assertMachineEvent(destroyed, 'machine.destroyed', machine, 'destroyed', { reason: 'requested' }, suite.ctx.clock.now());
  });

  test('machine.error from a failed boot and from a crash; machine.stopped by the host (platform; balance-empty is billing\'s: test/billing/enforcement.test.ts)', async () => {
    const failing = await createMachine(suite.owner, { name: 'no-boot', externalId: 'boot-7', labels: { simulate: 'boot-failure' } });
    await finishBoot(suite.ctx);
    const [bootError] = await received('machine.error');
    assertMachineEvent(bootError, 'machine.error', failing, 'error', { reason: 'boot-failure', message: 'The machine failed to boot.' }, suite.ctx.clock.now());

    const platform = await createMachine(suite.owner, { name: 'evicted', labels: { simulate: 'platform-stop' } });
    const crash = await createMachine(suite.owner, { name: 'crashy', labels: { simulate: 'crash' } });
    await finishBoot(suite.ctx);
    await received('machine.created', 'machine.created');
    await finishBoot(suite.ctx);
    const events = await received('machine.stopped', 'machine.error');
    const of = (id: string) => events.find((e) => (e.data.machine as { id: string }).id === id);
    assertMachineEvent(of(platform.id), 'machine.stopped', platform, 'stopped', { reason: 'platform' }, suite.ctx.clock.now());
    assertMachineEvent(of(crash.id), 'machine.error', crash, 'error', { reason: 'crash', message: 'The machine crashed.' }, suite.ctx.clock.now());
  });

  test('machine.expired followed by machine.stopped (expired), or by machine.destroyed', async () => {
    const stopAt = new Date(suite.ctx.clock.now() + 60_000).toISOString();
    const stopping = await runningMachine(suite.ctx, suite.owner, { name: 'short-lived', expiresAt: stopAt });
    await received('machine.created');
    suite.ctx.clock.set(Date.parse(stopAt));
    await suite.ctx.app.jobs.drain();
    const [expired, stopped] = await received('machine.expired', 'machine.stopped');
    assertMachineEvent(ofType([expired!, stopped!], 'machine.expired'), 'machine.expired', stopping, 'running', { expiresAt: stopAt, onExpire: 'stop' }, suite.ctx.clock.now());
    assertMachineEvent(ofType([expired!, stopped!], 'machine.stopped'), 'machine.stopped', stopping, 'stopped', { reason: 'expired' }, suite.ctx.clock.now());

    const destroyAt = new Date(suite.ctx.clock.now() + 60_000).toISOString();
    const ephemeral = await runningMachine(suite.ctx, suite.owner, { name: 'ephemeral', expiresAt: destroyAt, onExpire: 'destroy' });
    await received('machine.created');
    suite.ctx.clock.set(Date.parse(destroyAt));
    await suite.ctx.app.jobs.drain();
    const pair = await received('machine.expired', 'machine.destroyed');
    assertMachineEvent(ofType(pair, 'machine.expired'), 'machine.expired', ephemeral, 'running', { expiresAt: destroyAt, onExpire: 'destroy' }, suite.ctx.clock.now());
    assertMachineEvent(ofType(pair, 'machine.destroyed'), 'machine.destroyed', ephemeral, 'destroyed', { reason: 'expired' }, suite.ctx.clock.now());
  });

  test('machine.claimed from a warm pool', async () => {
    const pool = (await suite.owner.call('POST', '/api/pools', { name: 'warm', size: 'small', count: 1 })).json();
    await finishBoot(suite.ctx);
    await received('machine.created');
    const claim = await suite.owner.call('POST', '/api/machines', { name: 'claimed', pool: 'warm', externalId: 'job-7', labels: { who: 'agent' } });
    assert.equal(claim.statusCode, 201);
    const machine = claim.json();
    const [claimed] = await received('machine.claimed');
    assertMachineEvent(claimed, 'machine.claimed', machine, 'running', { pool: { id: pool.id, name: 'warm' } }, suite.ctx.clock.now());
    await finishBoot(suite.ctx);
    await received('machine.created');
  });

  test('run.succeeded and run.failed with the run summary and the four-field machine summary; output cut at 2,000 characters', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'runner', externalId: 'r-1', labels: { kind: 'ci' } });
    await received('machine.created');
    const long = `echo ${'x'.repeat(2500)}`;
    const ok = (await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: long })).json();
    assert.equal(ok.status, 'pending', 'the outcome arrives as an event, not in the answer');
    const [succeeded] = await received('run.succeeded');
    assertRunEvent(succeeded, 'run.succeeded', { id: ok.id, source: 'manual', sourceId: null, status: 'succeeded', output: long.slice(0, 2000) }, machine, suite.ctx.clock.now());
    assert.equal((succeeded!.data.run as { output: string }).output.length, 2000);

    const bad = (await suite.owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'make test; exit 3' })).json();
    const [failed] = await received('run.failed');
    assertRunEvent(failed, 'run.failed', { id: bad.id, source: 'manual', sourceId: null, status: 'failed', output: 'make test; exit 3' }, machine, suite.ctx.clock.now());
  });

  test('a schedule run with stopAfter: run.succeeded, then machine.stopped "after schedule <name>"', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'nightly-box', externalId: 'cron-1', labels: { when: 'nightly' } });
    await received('machine.created');
    const minute = 60_000;
    suite.ctx.clock.set(Math.ceil(suite.ctx.clock.now() / minute) * minute + 1000);
    const schedule = (await suite.owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'nightly', cron: '* * * * *', command: 'backup', stopAfter: true })).json();
    suite.ctx.clock.set(Date.parse(schedule.nextRunAt));
    await suite.ctx.app.jobs.drain();
    const events = await received('run.succeeded', 'machine.stopped');
    const [run] = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs`)).json().data;
    assertRunEvent(ofType(events, 'run.succeeded'), 'run.succeeded', { id: run.id, source: 'schedule', sourceId: schedule.id, status: 'succeeded', output: 'backup' }, machine, suite.ctx.clock.now());
    assertMachineEvent(ofType(events, 'machine.stopped'), 'machine.stopped', machine, 'stopped', { reason: 'after schedule nightly' }, suite.ctx.clock.now());
    await suite.owner.call('DELETE', `/api/schedules/${schedule.id}`);
  });

  test('an inbound webhook run with stopAfter: run.failed, then machine.stopped "after webhook <name>"', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'hooked', externalId: 'gh-2', labels: { repo: 'site' } });
    await received('machine.created');
    const inbound = (await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: machine.id, name: 'deploy', command: 'false', stopAfter: true })).json();
    const body = JSON.stringify({ ref: 'main' });
    const triggered = await suite.ctx.app.inject({
      method: 'POST',
      url: pathOf(inbound.url),
      headers: { 'content-type': 'application/json', 'service-signature': signatureHeader(inbound.secret, body, Math.floor(suite.ctx.clock.now() / 1000)) },
      payload: body,
    });
    assert.equal(triggered.statusCode, 202);
    assert.equal(triggered.json().status, 'pending', 'answered at once');
    const events = await received('run.failed', 'machine.stopped');
    assertRunEvent(ofType(events, 'run.failed'), 'run.failed', { id: triggered.json().id, source: 'webhook', sourceId: inbound.id, status: 'failed', output: 'false' }, machine, suite.ctx.clock.now());
    assertMachineEvent(ofType(events, 'machine.stopped'), 'machine.stopped', machine, 'stopped', { reason: 'after webhook deploy' }, suite.ctx.clock.now());
  });

  test('machine.paused and machine.resumed (CONTRACT 20), to an endpoint subscribed to "*"', async () => {
    const machine = await createMachine(suite.owner, { name: 'napper', labels: { team: 'infra' } });
    await finishBoot(suite.ctx);
    await received('machine.created');
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    const [paused] = await received('machine.paused');
    assertMachineEvent(paused, 'machine.paused', machine, 'paused', {}, suite.ctx.clock.now());
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/resume`)).statusCode, 200);
    const [resumed] = await received('machine.resumed');
    assertMachineEvent(resumed, 'machine.resumed', machine, 'running', {}, suite.ctx.clock.now());
  });

  test('every type of spec 6.1 arrived, and nothing else', () => {
    const types = new Set(hook.requests.map((request) => request.headers['service-event']));
    assert.deepEqual([...types].sort(), [
      'machine.claimed', 'machine.created', 'machine.destroyed', 'machine.error', 'machine.expired',
      'machine.paused', 'machine.resumed', 'machine.started', 'machine.stopped', 'run.failed', 'run.succeeded',
    ]);
    assert.equal(new Set(hook.requests.map((request) => request.headers['service-delivery'])).size, seen.size, 'no unexpected deliveries');
  });
});
