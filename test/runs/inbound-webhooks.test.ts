import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { before, describe, test } from 'node:test';
import {
  assertMachineEvent,
  assertRunEvent,
  breakProvider,
  eventCursor,
  finishBoot,
  machineSuite,
  newOwner,
  pathOf,
  runningMachine,
  runsSettled,
  signatureHeader,
  type CreatedMachine,
} from '../support/machines.ts';

interface CreatedHook {
  id: string;
  url: string;
  secret: string;
}

describe('inbound webhooks', () => {
  const suite = machineSuite();
  let machine: CreatedMachine;
  let hook: CreatedHook;
  before(async () => {
    machine = await runningMachine(suite.ctx, suite.owner, { name: 'hooked', externalId: 'gh-runner', labels: { ci: 'yes' } });
    hook = (await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: machine.id, name: 'on push', command: 'git pull && make' })).json();
  });

  const unixNow = () => Math.floor(suite.ctx.clock.now() / 1000);
  const deliver = (url: string, body: string, headers: Record<string, string>) =>
    suite.ctx.app.inject({ method: 'POST', url: pathOf(url), payload: body, headers: { 'content-type': 'application/json', ...headers } });
  const signed = (target: CreatedHook, body: string, t = unixNow()) => deliver(target.url, body, { 'service-signature': signatureHeader(target.secret, body, t) });

  test('create answers the URL and the secret once; reads show neither', async () => {
    assert.match(hook.id, /^ihk_[0-9a-z]{26}$/);
    assert.match(hook.url, /^http:\/\/localhost:3000\/api\/hooks\/[A-Za-z0-9_-]{43}$/);
    assert.match(hook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const read = (await suite.owner.call('GET', `/api/inbound-webhooks/${hook.id}`)).json();
    assert.deepEqual(read, {
      id: hook.id,
      machineId: machine.id,
      name: 'on push',
      command: 'git pull && make',
      stopAfter: false,
      lastTriggeredAt: null,
      createdAt: new Date(suite.ctx.clock.now()).toISOString(),
    });
    assert.deepEqual((await suite.owner.call('GET', '/api/inbound-webhooks')).json(), { data: [read], nextCursor: null });
    assert.ok(!suite.ctx.responses.slice(-2).some((body) => body.includes(hook.secret) || body.includes(pathOf(hook.url))));

    const stranger = await newOwner(suite.ctx);
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
    for (const [payload, status] of cases) assert.equal((await suite.owner.call('POST', '/api/inbound-webhooks', payload)).statusCode, status, JSON.stringify(payload));
  });

  test('a signed POST queues a run: 202 at once with the run, pending; run.succeeded with source webhook follows', async () => {
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const body = '{"ref":"refs/heads/main",  "commits": [1, 2]}';
    const response = await signed(hook, body);
    assert.equal(response.statusCode, 202, response.body);
    const queued = response.json();
    assert.equal(queued.source, 'webhook');
    assert.equal(queued.sourceId, hook.id);
    assert.equal(queued.status, 'pending', 'the request does not wait for the command');
    assert.equal(queued.output, null);
    await runsSettled(suite.ctx);
    const run = (await suite.owner.call('GET', `/api/runs/${queued.id}`)).json();
    assert.equal(run.status, 'succeeded');
    assert.equal(run.output, 'git pull && make');
    const [event, ...rest] = await events();
    assertRunEvent(event, 'run.succeeded', { id: run.id, source: 'webhook', sourceId: hook.id, status: 'succeeded', output: 'git pull && make' }, machine, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await suite.owner.call('GET', `/api/inbound-webhooks/${hook.id}`)).json().lastTriggeredAt, new Date(suite.ctx.clock.now()).toISOString());
  });

  test('regression: the inbound POST waited for the command (1.5 s provider, 1,510 ms answer); it answers 202 at once', async () => {
    const restore = breakProvider(suite.ctx, 'runCommand', (m) => m.id === machine.id, () => sleep(1500));
    try {
      const started = performance.now();
      const response = await signed(hook, '{"slow":true}');
      assert.ok(performance.now() - started < 1000, `answered in ${Math.round(performance.now() - started)} ms`);
      assert.equal(response.statusCode, 202);
      assert.ok(['pending', 'running'].includes(response.json().status));
      await runsSettled(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/runs/${response.json().id}`)).json().status, 'succeeded');
    } finally {
      restore();
    }
  });

  test('the signature covers the raw bytes, whatever the content type, and an empty body', async () => {
    const form = 'a=1&b=%20two';
    const asForm = await deliver(hook.url, form, { 'content-type': 'application/x-www-form-urlencoded', 'service-signature': signatureHeader(hook.secret, form, unixNow()) });
    assert.equal(asForm.statusCode, 202, asForm.body);
    const empty = await suite.ctx.app.inject({ method: 'POST', url: pathOf(hook.url), headers: { 'service-signature': signatureHeader(hook.secret, '', unixNow()) } });
    assert.equal(empty.statusCode, 202, empty.body);
    const rotatedPair = `${signatureHeader(hook.secret, '{"n":1}', unixNow())},v1=${'0'.repeat(64)}`;
    assert.equal((await deliver(hook.url, '{"n":1}', { 'service-signature': rotatedPair })).statusCode, 202, 'any matching v1 is enough');
    await runsSettled(suite.ctx);
  });

  test("a sender's own Authorization header (Basic, or a foreign Bearer) does not get in the way of the signature", async () => {
    for (const [body, authorization] of [['{"ref":"main"}', 'Basic dXNlcjpwYXNz'], ['{"ref":"dev"}', 'Bearer ghp_not-ours']] as const) {
      const signature = signatureHeader(hook.secret, body, unixNow());
      assert.equal((await deliver(hook.url, body, { 'service-signature': signature, authorization })).statusCode, 202, authorization);
    }
    await runsSettled(suite.ctx);
  });

  test('timestamps up to 300 seconds away are accepted, further ones refused', async () => {
    assert.equal((await signed(hook, '{}', unixNow() - 300)).statusCode, 202);
    assert.equal((await signed(hook, '{}', unixNow() + 300)).statusCode, 202);
    assert.equal((await signed(hook, '{}', unixNow() - 301)).statusCode, 401);
    assert.equal((await signed(hook, '{}', unixNow() + 301)).statusCode, 401);
    await runsSettled(suite.ctx);
  });

  test('a missing, malformed or wrong signature is refused with 401 and runs nothing', async () => {
    const events = eventCursor(suite.ctx, suite.owner);
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
      // RFC 9110: every 401 names a scheme that would work; here the signature scheme.
      assert.match(String(response.headers['www-authenticate']), /^Service-Signature realm="inbound-webhook"/, label);
    }
    assert.deepEqual(await events(), []);

    const unknown = await signed({ ...hook, url: `${hook.url.slice(0, -5)}AAAAA` }, body);
    assert.equal(unknown.statusCode, 404, 'an unknown URL');
    const tooBig = 'x'.repeat(1024 * 1024 + 1);
    assert.equal((await signed(hook, tooBig)).statusCode, 413);
  });

  test('stopAfter stops the machine with reason "after webhook <name>"; a stopped machine is booted first', async () => {
    const target = await runningMachine(suite.ctx, suite.owner, { name: 'deployer' });
    const deployHook: CreatedHook = (await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'deploy', command: 'deploy.sh', stopAfter: true })).json();
    const events = eventCursor(suite.ctx, suite.owner);
    await events();

    const first = await signed(deployHook, '{"deploy":1}');
    assert.equal(first.statusCode, 202);
    await runsSettled(suite.ctx);
    assert.equal((await suite.owner.call('GET', `/api/runs/${first.json().id}`)).json().status, 'succeeded');
    let [succeeded, stopped, ...rest] = await events();
    assertRunEvent(succeeded, 'run.succeeded', { id: first.json().id, source: 'webhook', sourceId: deployHook.id, status: 'succeeded', output: 'deploy.sh' }, target, suite.ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', target, 'stopped', { reason: 'after webhook deploy' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);

    const second = await signed(deployHook, '{"deploy":2}');
    assert.equal(second.statusCode, 202);
    assert.equal(second.json().status, 'pending', 'waits for the boot');
    assert.equal((await suite.owner.call('GET', `/api/machines/${target.id}`)).json().status, 'starting');
    await finishBoot(suite.ctx);
    const [started, ...after] = await events();
    assertMachineEvent(started, 'machine.started', target, 'running', {}, suite.ctx.clock.now());
    [succeeded, stopped, ...rest] = after;
    assertRunEvent(succeeded, 'run.succeeded', { id: second.json().id, source: 'webhook', sourceId: deployHook.id, status: 'succeeded', output: 'deploy.sh' }, target, suite.ctx.clock.now());
    assertMachineEvent(stopped, 'machine.stopped', target, 'stopped', { reason: 'after webhook deploy' }, suite.ctx.clock.now());
    assert.deepEqual(rest, []);
    assert.equal((await suite.owner.call('GET', `/api/runs/${second.json().id}`)).json().status, 'succeeded');
  });

  test('regression: a bad inbound signature was a 401 without WWW-Authenticate (RFC 9110 requires one on every 401)', async () => {
    const response = await deliver(hook.url, '{}', { 'service-signature': `t=${unixNow()},v1=${'0'.repeat(64)}` });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().code, 'invalid_signature');
    assert.equal(response.headers['www-authenticate'], 'Service-Signature realm="inbound-webhook", algorithm="hmac-sha256"');
  });

  test('regression: a signed request replayed within the 300 s window started a run each time; a replay is 409 replayed', async () => {
    const events = eventCursor(suite.ctx, suite.owner);
    await events();
    const body = '{"ref":"refs/heads/release"}';
    const header = signatureHeader(hook.secret, body, unixNow());
    const first = await deliver(hook.url, body, { 'service-signature': header });
    assert.equal(first.statusCode, 202);
    for (const [label, extra] of [['the same request', {}], ['a bogus extra v1 value', { 'service-signature': `${header},v1=${'f'.repeat(64)}` }]] as const) {
      suite.ctx.clock.advance(100_000);
      const again = await deliver(hook.url, body, { 'service-signature': header, ...extra });
      assert.equal(again.statusCode, 409, label);
      assert.equal(again.json().code, 'replayed', label);
      assert.match(again.json().detail, new RegExp(`run ${first.json().id}`), label);
    }
    await runsSettled(suite.ctx);
    const runs = (await suite.owner.call('GET', `/api/machines/${machine.id}/runs?limit=100`)).json().data.filter((run: { createdAt: string; sourceId: string }) => run.sourceId === hook.id);
    assert.equal(runs.filter((run: { id: string }) => run.id === first.json().id).length, 1);
    assert.deepEqual((await events()).map((e) => e.type), ['run.succeeded'], 'one run for one signed request');

    const resigned = await signed(hook, body);
    assert.equal(resigned.statusCode, 202, 'the same body signed anew (another timestamp) is a new request');
    await runsSettled(suite.ctx);

    // Receipts are kept while the signature could pass the timestamp check, then pruned.
    const receipts = () => suite.ctx.app.deps.db.selectFrom('inbound_webhook_receipts').select('run_id').where('hook_id', '=', hook.id).execute();
    assert.ok((await receipts()).some((receipt) => receipt.run_id === first.json().id));
    suite.ctx.clock.advance(300_000);
    await suite.ctx.app.jobs.drain();
    assert.ok(!(await receipts()).some((receipt) => receipt.run_id === first.json().id), 'pruned once the window has passed');
    assert.equal((await deliver(hook.url, body, { 'service-signature': header })).statusCode, 401, 'and the old signature has expired by then');
  });

  test('two identical signed requests at once start one run', async () => {
    const body = '{"burst":true}';
    const header = signatureHeader(hook.secret, body, unixNow());
    const answers = await Promise.all([1, 2, 3].map(() => deliver(hook.url, body, { 'service-signature': header })));
    assert.deepEqual(answers.map((a) => a.statusCode).sort(), [202, 409, 409]);
    await runsSettled(suite.ctx);
  });

  test('a deleted webhook, or one of a destroyed machine, is 404', async () => {
    const target = await runningMachine(suite.ctx, suite.owner, { name: 'temporary' });
    const a: CreatedHook = (await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'a', command: 'ls' })).json();
    const b: CreatedHook = (await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'b', command: 'ls' })).json();
    assert.equal((await suite.owner.call('DELETE', `/api/inbound-webhooks/${a.id}`)).statusCode, 204);
    assert.equal((await signed(a, '{}')).statusCode, 404);
    assert.equal((await suite.owner.call('DELETE', `/api/inbound-webhooks/${a.id}`)).statusCode, 404);
    await suite.owner.call('DELETE', `/api/machines/${target.id}`);
    assert.equal((await signed(b, '{}')).statusCode, 404);
    assert.equal((await suite.owner.call('GET', `/api/inbound-webhooks/${b.id}`)).statusCode, 404);
    const onDestroyed = await suite.owner.call('POST', '/api/inbound-webhooks', { machineId: target.id, name: 'c', command: 'ls' });
    assert.equal(onDestroyed.statusCode, 409);
  });
});
