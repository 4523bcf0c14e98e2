import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { createSender, RESPONSE_BODY_LIMIT, type AttemptResult, type Sender } from '../../src/event-webhooks/sender.ts';
import { createThreadSender } from '../../src/event-webhooks/thread-sender.ts';
import { receiverPool, type Receiver } from '../support/receiver.ts';

// Far above /slow's 100 ms: both senders must see it answer, however loaded the machine.
const config = { timeoutMs: 1000, allowPrivateTargets: true };
const logger = pino({ level: 'silent' });
const headers = { 'content-type': 'application/json', 'service-event': 'machine.created' };
const comparable = ({ durationMs: _, ...rest }: AttemptResult) => rest;

/**
 * WEBHOOK_SENDER_THREAD: the sender on a thread of its own answers every
 * attempt as the sender on the service's thread does, attempt by attempt
 * within the batches it passes across; and a thread that stops costs the
 * attempts it held an ordinary failure, never a hung delivery.
 */
describe('the webhook sender on a thread of its own', { timeout: 20_000 }, () => {
  const receivers = receiverPool();
  let answers: Receiver;

  before(async () => {
    answers = await receivers.start((request) => {
      const path = request.path;
      if (path === '/ok') return { status: 200, body: `got ${request.body}` };
      if (path === '/unavailable') return { status: 503, body: 'later' };
      if (path === '/moved') return { status: 302, headers: { location: 'https://example.com/' } };
      if (path === '/long') return { status: 200, body: 'é'.repeat(RESPONSE_BODY_LIMIT) };
      if (path === '/slow') return { status: 200, body: 'slow', delayMs: 100 };
      return 'hang';
    });
  });
  after(() => receivers.closeAll());

  test('each attempt of a batch gets its own answer, the same as on the service\'s thread', async () => {
    const inThread = createSender(config);
    const onThread = createThreadSender(config, logger, { startNow: true });
    try {
      const targets = ['/ok', '/unavailable', '/moved', '/long', '/slow', '/hang'].map((path) => `${answers.url.replace(/\/[^/]*$/, '')}${path}`);
      targets.push('https://127.0.0.1:9/refused', 'not a url', 'https://127.0.0.1:9/x');
      const send = (sender: Sender) => Promise.all(targets.map((url, i) => sender.send(url, headers, `{"n":${i}}`)));
      const [expected, actual] = await Promise.all([send(inThread), send(onThread)]);
      assert.deepEqual(actual.map(comparable), expected.map(comparable));
      assert.deepEqual(
        actual.map((result) => [result.ok, result.status]),
        [[true, 200], [false, 503], [false, 302], [true, 200], [true, 200], [false, null], [false, null], [false, null], [false, null]],
      );
      assert.equal(actual[0]!.body, 'got {"n":0}', 'each answer goes back to its own attempt');
      assert.equal(actual[5]!.error, 'no response within 1000 ms (the request was sent)');
      assert.ok(actual[4]!.durationMs >= 90, `the attempt's own time, measured on the thread (${actual[4]!.durationMs} ms)`);
    } finally {
      await Promise.all([inThread.close(), onThread.close()]);
    }
  });

  test('a thread that stops fails the attempts it held, and the next attempt starts a new one', async () => {
    const sender = createThreadSender(config, logger, { startNow: true, entry: new URL('./fixtures/failing-sender.worker.ts', import.meta.url) });
    try {
      const base = answers.url.replace(/\/[^/]*$/, '');
      const [held, crashing] = await Promise.all([sender.send(`${base}/hang`, headers, '{}'), sender.send(`${base}/crash`, headers, '{}')]);
      for (const result of [held, crashing]) assert.deepEqual(result, { ok: false, status: null, body: null, error: 'the sending thread stopped: whether the request was sent is not known', durationMs: 0 });
      assert.deepEqual(comparable(await sender.send(`${base}/ok`, headers, 'again')), { ok: true, status: 200, body: 'got again', error: null });
    } finally {
      await sender.close();
    }
  });

  test('close waits for the attempts under way; an attempt after it is not sent', async () => {
    const sender = createThreadSender(config, logger, { startNow: true });
    const base = answers.url.replace(/\/[^/]*$/, '');
    const before = answers.requests.length;
    const underWay = sender.send(`${base}/slow`, headers, 'under way');
    await new Promise((resolve) => setTimeout(resolve, 50));
    await sender.close();
    assert.deepEqual(comparable(await underWay), { ok: true, status: 200, body: 'slow', error: null });
    assert.deepEqual(await sender.send(`${base}/ok`, headers, 'late'), { ok: false, status: null, body: null, error: 'the sender is closed', durationMs: 0 });
    assert.equal(answers.requests.length, before + 1, 'only the attempt under way reached the receiver');
  });
});
