import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from '../support/app.ts';
import {
  assertMachineEvent,
  assertRunEvent,
  createMachineTestApp,
  eventCursor,
  finishBoot,
  newOwner,
  pathOf,
  runningMachine,
  signatureHeader,
  type CreatedMachine,
  type Owner,
} from '../support/machines.ts';

interface CreatedHook {
  id: string;
  url: string;
  secret: string;
}

describe('inbound webhooks', () => {
  let ctx: TestContext;
  let owner: Owner;
  let machine: CreatedMachine;
  let hook: CreatedHook;
  before(async () => {
    ctx = await createMachineTestApp();
    owner = await newOwner(ctx);
    machine = await runningMachine(ctx, owner, { name: 'hooked', externalId: 'gh-runner', labels: { ci: 'yes' } });
    hook = (await owner.call('POST', '/api/inbound-webhooks', { machineId: machine.id, name: 'on push', command: 'git pull && make' })).json();
  });
  after(() => ctx.close());

  const unixNow = () => Math.floor(ctx.clock.now() / 1000);
  const deliver = (url: string, body: string, headers: Record<string, string>) =>
    ctx.app.inject({ method: 'POST', url: pathOf(url), payload: body, headers: { 'content-type': 'application/json', ...headers } });
  const signed = (target: CreatedHook, body: string, t = unixNow()) => deliver(target.url, body, { 'service-signature': signatureHeader(target.secret, body, t) });

  test('create answers the URL and the secret once; reads show neither', async () => {
    assert.match(hook.id, /^ihk_[0-9a-z]{26}$/);
    assert.match(hook.url, /^http:\/\/localhost:3000\/api\/hooks\/[A-Za-z0-9_-]{43}$/);
    assert.match(hook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const read = (await owner.call('GET', `/api/inbound-webhooks/${hook.id}`)).json();
    assert.deepEqual(read, {
      id: hook.id,
      machineId: machine.id,
      name: 'on push',
      command: 'git pull && make',
      stopAfter: false,
      lastTriggeredAt: null,
      createdAt: new Date(ctx.clock.now()).toISOString(),
    });
    assert.deepEqual((await owner.call('GET', '/api/inbound-webhooks')).json(), { data: [read], nextCursor: null });
    assert.ok(!ctx.responses.slice(-2).some((body) => body.includes(hook.secret) || body.includes(pathOf(hook.url))));

    const stranger = await newOwner(ctx);
    assert.equal((await stranger.call('GET', `/api/inbound-webhooks/${hook.id}`)).statusCode, 404);
    assert.equal((await stranger.call('DELETE', `/api/inbound-webhooks/${hook.id}`)).statusCode, 404);
  });

  test('create refuses bad input', async () => {
    const cases: Array<[unknown, number]> = [
      [{ machineId: machine.id, name: 'x' }, 400],
      [{ machineId: machine.id, name: ' ', command: 'ls' }, 400],
      [{ machineId: machine.id, name: 'x', command: 'ls', secret: 'mine' }, 400],
      [{ machineId: 'mch_01jzzzzzzzzzzzzzzzzzzzzzzz', name: 'x', command: 'ls' }, 404],
    ];
    for (const [payload, status] of cases) assert.equal((await owner.call('POST', '/api/inbound-webhooks', payload)).statusCode, status, JSON.stringify(payload));
  });

  test('a signed POST starts a run: 202 with the run, then run.succeeded with source webhook', async () => {
    const events = eventCursor(ctx, owner);
    await events();
    const body = '{"ref":"refs/heads/main",  "commits": [1, 2]}';
    const response = await signed(hook, body);
    assert.equal(response.statusCode, 202, response.body);
    const run = response.json();
    assert.equal(run.source, 'webhook');
    assert.equal(run.sourceId, hook.id);
    assert.equal(run.status, 'succeeded');
    assert.equal(run.output, 'git pull && make');
    const [event, ...rest] = await events();
    assertRunEvent(event, 'run.succeeded', { id: run.id, source: 'webhook', sourceId: hook.id, status: 'succeeded', output: 'git pull && make' }, machine, ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await owner.call('GET', `/api/inbound-webhooks/${hook.id}`)).json().lastTriggeredAt, new Date(ctx.clock.now()).toISOString());
  });

  test('the signature covers the raw bytes, whatever the content type, and an empty body', async () => {
    const form = 'a=1&b=%20two';
    const asForm = await deliver(hook.url, form, { 'content-type': 'application/x-www-form-urlencoded', 'service-signature': signatureHeader(hook.secret, form, unixNow()) });
    assert.equal(asForm.statusCode, 202, asForm.body);
    const empty = await ctx.app.inject({ method: 'POST', url: pathOf(hook.url), headers: { 'service-signature': signatureHeader(hook.secret, '', unixNow()) } });
    assert.equal(empty.statusCode, 202, empty.body);
    const rotatedPair = `${signatureHeader(hook.secret, '{}', unixNow())},v1=${'0'.repeat(64)}`;
    assert.equal((await deliver(hook.url, '{}', { 'service-signature': rotatedPair })).statusCode, 202, 'any matching v1 is enough');
  });

  test("a sender's own Authorization header (Basic, or a foreign Bearer) does not get in the way of the signature", async () => {
    const body = '{"ref":"main"}';
    const signature = signatureHeader(hook.secret, body, unixNow());
    assert.equal((await deliver(hook.url, body, { 'service-signature': signature, authorization: 'Basic dXNlcjpwYXNz' })).statusCode, 202);
    assert.equal((await deliver(hook.url, body, { 'service-signature': signature, authorization: 'Bearer ghp_not-ours' })).statusCode, 202);
  });

  test('timestamps up to 300 seconds away are accepted, further ones refused', async () => {
    assert.equal((await signed(hook, '{}', unixNow() - 300)).statusCode, 202);
    assert.equal((await signed(hook, '{}', unixNow() + 300)).statusCode, 202);
    assert.equal((await signed(hook, '{}', unixNow() - 301)).statusCode, 401);
    assert.equal((await signed(hook, '{}', unixNow() + 301)).statusCode, 401);
  });

  test('a missing, malformed or wrong signature is refused with 401 and runs nothing', async () => {
    const events = eventCursor(ctx, owner);
    await events();
    const body = '{"ok":true}';
    const t = unixNow();
    const good = signatureHeader(hook.secret, body, t);
    const cases: Array<[string, Record<string, string>, string]> = [
      ['missing', {}, body],
      ['empty', { 'service-signature': '' }, body],
      ['no v1', { 'service-signature': `t=${t}` }, body],
      ['no t', { 'service-signature': good.replace(/^t=\d+,/, '') }, body],
      ['garbage', { 'service-signature': 'sha256=abc' }, body],
      ['wrong secret', { 'service-signature': signatureHeader('whsec_not-the-secret', body, t) }, body],
      ['tampered body', { 'service-signature': good }, '{"ok":false}'],
      ['other timestamp', { 'service-signature': good.replace(`t=${t}`, `t=${t - 1}`) }, body],
      ['uppercase hex', { 'service-signature': good.replace(/v1=(.*)$/, (_, hex: string) => `v1=${hex.toUpperCase()}`) }, body],
    ];
    for (const [label, headers, payload] of cases) {
      const response = await deliver(hook.url, payload, headers);
      assert.equal(response.statusCode, 401, label);
      assert.equal(response.json().code, 'invalid_signature', label);
    }
    assert.deepEqual(await events(), []);

    const unknown = await signed({ ...hook, url: `${hook.url.slice(0, -5)}AAAAA` }, body);
    assert.equal(unknown.statusCode, 404, 'an unknown URL');
    const tooBig = 'x'.repeat(1024 * 1024 + 1);
    assert.equal((await signed(hook, tooBig)).statusCode, 413);
  });

  test('stopAfter stops the machine with reason "after webhook <name>"; a stopped machine is booted first', async () => {
    const target = await runningMachine(ctx, owner, { name: 'deployer' });
    const deployHook: CreatedHook = (await owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'deploy', command: 'deploy.sh', stopAfter: true })).json();
    const events = eventCursor(ctx, owner);
    await events();

    const first = await signed(deployHook, '{}');
    assert.equal(first.json().status, 'succeeded');
    let [succeeded, stopped, ...rest] = await events();
    assertRunEvent(succeeded, 'run.succeeded', { id: first.json().id, source: 'webhook', sourceId: deployHook.id, status: 'succeeded', output: 'deploy.sh' }, target, ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', target, 'stopped', { reason: 'after webhook deploy' }, ctx.clock.now());
    assert.deepEqual(rest, []);

    const second = await signed(deployHook, '{}');
    assert.equal(second.statusCode, 202);
    assert.equal(second.json().status, 'pending', 'waits for the boot');
    assert.equal((await owner.call('GET', `/api/machines/${target.id}`)).json().status, 'starting');
    await finishBoot(ctx);
    const [started, ...after] = await events();
    assertMachineEvent(started, 'machine.started', target, 'running', {}, ctx.clock.now());
    [succeeded, stopped, ...rest] = after;
    assertRunEvent(succeeded, 'run.succeeded', { id: second.json().id, source: 'webhook', sourceId: deployHook.id, status: 'succeeded', output: 'deploy.sh' }, target, ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', target, 'stopped', { reason: 'after webhook deploy' }, ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await owner.call('GET', `/api/runs/${second.json().id}`)).json().status, 'succeeded');
  });

  test('a deleted webhook, or one of a destroyed machine, is 404', async () => {
    const target = await runningMachine(ctx, owner, { name: 'temporary' });
    const a: CreatedHook = (await owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'a', command: 'ls' })).json();
    const b: CreatedHook = (await owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'b', command: 'ls' })).json();
    assert.equal((await owner.call('DELETE', `/api/inbound-webhooks/${a.id}`)).statusCode, 204);
    assert.equal((await signed(a, '{}')).statusCode, 404);
    assert.equal((await owner.call('DELETE', `/api/inbound-webhooks/${a.id}`)).statusCode, 404);
    await owner.call('DELETE', `/api/machines/${target.id}`);
    assert.equal((await signed(b, '{}')).statusCode, 404);
    assert.equal((await owner.call('GET', `/api/inbound-webhooks/${b.id}`)).statusCode, 404);
    const onDestroyed = await owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'c', command: 'ls' });
    assert.equal(onDestroyed.statusCode, 409);
  });
});
